// Prints what Trivy's built-in secret rules find, as JSON lines, for the held-out secret corpus
// (scripts/install-secret-heldout.sh).
//
//	trivy-samples rules          one line per built-in rule: its id, title, keywords and regex
//	trivy-samples scan FILE...   one line per finding: the file, the rule, the byte offsets of
//	                             the secret and the secret itself; one line per file without any
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	secret "otelhooks.local/secret-heldout/trivysecret"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: trivy-samples rules | scan FILE...")
		os.Exit(2)
	}
	scanner := secret.NewScanner(nil)
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	switch os.Args[1] {
	case "rules":
		for _, rule := range scanner.Rules {
			must(out.Encode(map[string]any{
				"rule":     rule.ID,
				"title":    rule.Title,
				"keywords": rule.Keywords,
				"regex":    rule.Regex.String(),
			}))
		}
	case "scan":
		for _, path := range os.Args[2:] {
			scan(scanner, out, path)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

// scan prints the findings of one file. The file is scanned under a neutral directory so that
// Trivy's path allow rules (test and example folders) do not skip it; its own name is kept, as
// some rules apply to some file names only.
func scan(scanner secret.Scanner, out *json.Encoder, path string) {
	content, err := os.ReadFile(path)
	must(err)
	result := scanner.Scan(secret.ScanArgs{
		FilePath: filepath.Join("fixtures", filepath.Base(path)),
		Content:  bytes.NewReader(content),
	})
	for _, finding := range result.Findings {
		start, end := finding.Offset, -1
		for _, rule := range scanner.Rules {
			if rule.ID != finding.RuleID {
				continue
			}
			for _, loc := range scanner.FindLocations(rule, content) {
				if loc.Start == start {
					end = loc.End
				}
			}
		}
		if end < 0 {
			fmt.Fprintf(os.Stderr, "%s: no location for %s at %d\n", path, finding.RuleID, start)
			os.Exit(1)
		}
		must(out.Encode(map[string]any{
			"file":   path,
			"rule":   finding.RuleID,
			"start":  start,
			"end":    end,
			"secret": string(content[start:end]),
		}))
	}
	if len(result.Findings) == 0 {
		must(out.Encode(map[string]any{"file": path, "rule": nil}))
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
