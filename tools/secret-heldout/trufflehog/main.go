// Extracts the secrets TruffleHog's detector tests say must be found, as JSON lines, for the
// held-out secret corpus (scripts/install-secret-heldout.sh).
//
//	trufflehog-samples DETECTORS_DIR
//
// DETECTORS_DIR is pkg/detectors of the pinned module. Each <name>_test.go (integration tests
// excluded: their secrets come from a secret store at test time) is parsed, not run. A test case
// is a composite literal with an `input` and a `want []string{...}` field; every string of a
// non-empty `want` is one line:
//
//	{"detector", "file", "case", "want", "input", "secret", "how"}     a sample
//	{"detector", "file", "case", "want", "skipped"}                     a string left out, and why
//
// Strings are evaluated from the file's own literals only: string and raw literals, names bound
// once in the file to such a value, `+`, `[]byte(...)`, and fmt.Sprintf of those with %s, %v
// and %d (an input written around a literal secret). A `want` built by fmt.Sprintf, or from any
// other call (environment, secret store, a generator), is skipped. "secret" is the `want` string
// when it stands in the input as written ("how": "literal"); when it does not (a detector that
// joins an id and a secret), its longest piece of 8+ characters that does ("how": "part"); else
// it is skipped.
// The last line per file is {"file", "detector", "integration": bool} for the counts.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type value struct {
	text    string
	sprintf bool // some of it was made by fmt.Sprintf
}

type file struct {
	bindings map[string][]ast.Expr // every expression a name is bound to in the file
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: trufflehog-samples DETECTORS_DIR")
		os.Exit(2)
	}
	root := os.Args[1]
	var paths []string
	must(filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(path, "_test.go") {
			paths = append(paths, path)
		}
		return err
	}))
	sort.Strings(paths)
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for _, path := range paths {
		rel, _ := filepath.Rel(root, path)
		detector := filepath.ToSlash(filepath.Dir(rel))
		integration := strings.HasSuffix(path, "_integration_test.go")
		if !integration {
			for _, line := range extract(path) {
				line["detector"] = detector
				line["file"] = filepath.ToSlash(rel)
				must(out.Encode(line))
			}
		}
		must(out.Encode(map[string]any{"file": filepath.ToSlash(rel), "detector": detector, "integration": integration}))
	}
}

func extract(path string) []map[string]any {
	fset := token.NewFileSet()
	tree, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return []map[string]any{{"skipped": "does not parse: " + err.Error()}}
	}
	f := &file{bindings: map[string][]ast.Expr{}}
	ast.Inspect(tree, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) {
					f.bindings[name.Name] = append(f.bindings[name.Name], n.Values[i])
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i, lhs := range n.Lhs {
					if id, ok := lhs.(*ast.Ident); ok {
						f.bindings[id.Name] = append(f.bindings[id.Name], n.Rhs[i])
					}
				}
			}
		}
		return true
	})
	var lines []map[string]any
	ast.Inspect(tree, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		fields := map[string]ast.Expr{}
		for _, elt := range lit.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				if key, ok := kv.Key.(*ast.Ident); ok {
					fields[key.Name] = kv.Value
				}
			}
		}
		input, hasInput := fields["input"]
		want, hasWant := fields["want"]
		if !hasInput || !hasWant {
			return true
		}
		wants, ok := f.list(want)
		if !ok {
			if !isNil(want) && !isDetectorResults(want) {
				lines = append(lines, map[string]any{"case": caseName(f, fields), "skipped": "want is not a list of strings"})
			}
			return true
		}
		in, inErr := f.eval(input, 0)
		for _, w := range wants {
			line := map[string]any{"case": caseName(f, fields)}
			got, err := f.eval(w, 0)
			switch {
			case err != nil:
				line["skipped"] = "want: " + err.Error()
			case got.sprintf:
				line["want"], line["skipped"] = got.text, "want built by fmt.Sprintf"
			case inErr != nil:
				line["want"], line["skipped"] = got.text, "input: "+inErr.Error()
			default:
				line["want"], line["input"] = got.text, in.text
				secret, how := found(got, in.text)
				if secret == "" {
					line["skipped"] = "want not in the input (the detector joins or changes what it finds)"
				} else {
					line["secret"], line["how"] = secret, how
					if in.sprintf {
						line["input_built"] = "fmt.Sprintf of literals"
					}
				}
			}
			lines = append(lines, line)
		}
		return false
	})
	return lines
}

// found is what of a wanted string stands in the input as written: all of it, or else its
// longest piece the input holds (of a detector that joins an id and a secret, the longer).
func found(want value, input string) (string, string) {
	if strings.Contains(input, want.text) {
		return want.text, "literal"
	}
	if piece := longestCommon(want.text, input); len(piece) >= minPiece {
		return piece, "part"
	}
	return "", ""
}

const minPiece = 8 // the shortest secret the corpus measures

func longestCommon(a, b string) string {
	best, end := 0, 0
	prev := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
				if cur[j] > best {
					best, end = cur[j], i
				}
			}
		}
		prev = cur
	}
	return a[end-best : end]
}

func caseName(f *file, fields map[string]ast.Expr) string {
	if e, ok := fields["name"]; ok {
		if v, err := f.eval(e, 0); err == nil {
			return v.text
		}
	}
	return ""
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	if ok && id.Name == "nil" {
		return true
	}
	lit, ok := e.(*ast.CompositeLit)
	return ok && len(lit.Elts) == 0
}

func isDetectorResults(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.CompositeLit:
		if arr, ok := e.Type.(*ast.ArrayType); ok {
			if sel, ok := arr.Elt.(*ast.SelectorExpr); ok {
				return sel.Sel.Name == "Result"
			}
		}
		_, ok := e.Type.(*ast.Ident) // a struct of the test's own
		return ok
	case *ast.FuncLit, *ast.CallExpr:
		return true
	}
	return false
}

// list: the elements of a `[]string{...}` (or of a name bound once to one).
func (f *file) list(e ast.Expr) ([]ast.Expr, bool) {
	if id, ok := e.(*ast.Ident); ok {
		bound := f.bindings[id.Name]
		if len(bound) != 1 {
			return nil, false
		}
		e = bound[0]
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	arr, ok := lit.Type.(*ast.ArrayType)
	if !ok {
		return nil, false
	}
	if elt, ok := arr.Elt.(*ast.Ident); !ok || elt.Name != "string" {
		return nil, false
	}
	return lit.Elts, len(lit.Elts) > 0
}

func (f *file) eval(e ast.Expr, depth int) (value, error) {
	if depth > 20 {
		return value{}, fmt.Errorf("too deep")
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			if err != nil {
				return value{}, err
			}
			return value{text: s}, nil
		}
		if e.Kind == token.INT {
			return value{text: e.Value}, nil
		}
	case *ast.ParenExpr:
		return f.eval(e.X, depth+1)
	case *ast.Ident:
		bound := f.bindings[e.Name]
		if len(bound) != 1 {
			return value{}, fmt.Errorf("%s is bound %d times", e.Name, len(bound))
		}
		return f.eval(bound[0], depth+1)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, err := f.eval(e.X, depth+1)
			if err != nil {
				return value{}, err
			}
			y, err := f.eval(e.Y, depth+1)
			if err != nil {
				return value{}, err
			}
			return value{x.text + y.text, x.sprintf || y.sprintf}, nil
		}
	case *ast.CallExpr:
		if arr, ok := e.Fun.(*ast.ArrayType); ok && len(e.Args) == 1 {
			if elt, ok := arr.Elt.(*ast.Ident); ok && elt.Name == "byte" {
				return f.eval(e.Args[0], depth+1)
			}
		}
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "string" && len(e.Args) == 1 {
			return f.eval(e.Args[0], depth+1)
		}
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" && sel.Sel.Name == "Sprintf" && len(e.Args) > 0 {
				return f.sprintf(e.Args, depth)
			}
			return value{}, fmt.Errorf("built by a call (%s)", exprName(sel))
		}
		return value{}, fmt.Errorf("built by a call")
	}
	return value{}, fmt.Errorf("not a literal (%T)", e)
}

func (f *file) sprintf(args []ast.Expr, depth int) (value, error) {
	format, err := f.eval(args[0], depth+1)
	if err != nil {
		return value{}, err
	}
	for _, verb := range []string{"%q", "%x", "%f", "%t", "%+", "%#", "%*", "%["} {
		if strings.Contains(format.text, verb) {
			return value{}, fmt.Errorf("fmt.Sprintf with %s", verb)
		}
	}
	var values []any
	for _, a := range args[1:] {
		v, err := f.eval(a, depth+1)
		if err != nil {
			return value{}, err
		}
		values = append(values, v.text)
	}
	text := fmt.Sprintf(strings.ReplaceAll(format.text, "%d", "%s"), values...)
	if strings.Contains(text, "%!") {
		return value{}, fmt.Errorf("fmt.Sprintf: %s", text)
	}
	return value{text: text, sprintf: true}, nil
}

func exprName(sel *ast.SelectorExpr) string {
	if x, ok := sel.X.(*ast.Ident); ok {
		return x.Name + "." + sel.Sel.Name
	}
	return sel.Sel.Name
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
