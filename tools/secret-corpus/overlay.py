"""Patches copies of gitleaks' and reggen's sources so that gitleaks' config generator records
its samples.

gitleaks validates every rule, when it generates its config, against the samples written for it:
true positives (secrets in the formats the services document, in the syntaxes gitleaks
generates) and false positives (look-alikes collected from real code). This changes three files
of copies of the pinned modules (the build uses the copies through ``replace`` directives):

* ``cmd/generate/config/utils/validate.go``: ``Validate`` and ``ValidateWithPaths`` also write
  one JSON line per rule (its id, keywords, each true positive with the secrets gitleaks finds
  in it, and the false positives) to the file named by ``SAMPLES_OUT``;
* ``cmd/generate/config/utils/generate.go``: ``GenerateSampleSecrets`` remembers the service
  name and secret it was given, for the rule that is validated next;
* reggen's generator (random secrets from a regex) takes its seed from a counter, so that the
  corpus is the same on every machine.

Usage: ``python3 overlay.py GITLEAKS_COPY REGGEN_COPY`` patches the copies in place.
"""

from __future__ import annotations

import sys
from pathlib import Path

RECORDER = '''
var recordedGenerated []map[string]string

func recordRule(r *config.Rule, truePositives []string, falsePositives []string) {
	out := os.Getenv("SAMPLES_OUT")
	if out == "" {
		return
	}
	d := createSingleRuleDetector(r)
	tps := []map[string]any{}
	for _, tp := range truePositives {
		secrets := []string{}
		for _, f := range d.DetectString(tp) {
			secrets = append(secrets, f.Secret)
		}
		tps = append(tps, map[string]any{"text": tp, "secrets": secrets})
	}
	line, err := json.Marshal(map[string]any{
		"rule":        r.RuleID,
		"description": r.Description,
		"keywords":    r.Keywords,
		"tps":         tps,
		"fps":         falsePositives,
		"generated":   recordedGenerated,
	})
	recordedGenerated = nil
	if err != nil {
		panic(err)
	}
	f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\\n')); err != nil {
		panic(err)
	}
}

func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	r := validateOriginal(rule, truePositives, falsePositives)
	recordRule(r, truePositives, falsePositives)
	return r
}

func ValidateWithPaths(rule config.Rule, truePositives map[string]string, falsePositives map[string]string) *config.Rule {
	r := validateWithPathsOriginal(rule, truePositives, falsePositives)
	tps, fps := []string{}, []string{}
	for _, tp := range truePositives {
		tps = append(tps, tp)
	}
	for _, fp := range falsePositives {
		fps = append(fps, fp)
	}
	recordRule(r, tps, fps)
	return r
}
'''

GENERATED = '''
func GenerateSampleSecrets(identifier string, secret string) []string {
	recordedGenerated = append(recordedGenerated, map[string]string{"identifier": identifier, "secret": secret})
	return generateSampleSecretsOriginal(identifier, secret)
}
'''

SEED = '''
var seedCounter int64 = 20261203

func nextSeed() int64 {
	seedCounter++
	return seedCounter
}
'''


def patch(text: str, replacements: list[tuple[str, str]], extra: str, imports: list[str]) -> str:
    for old, new in replacements:
        if old not in text:
            raise SystemExit(f"overlay: {old!r} not found: the pinned source changed")
        text = text.replace(old, new, 1)
    for name in imports:
        text = text.replace("import (\n", f'import (\n\t"{name}"\n', 1)
    return text + extra


def main() -> None:
    gitleaks, reggen = (Path(p) for p in sys.argv[1:3])
    utils = gitleaks / "cmd" / "generate" / "config" / "utils"
    files = {
        utils / "validate.go": patch(
            (utils / "validate.go").read_text(),
            [
                ("func Validate(", "func validateOriginal("),
                ("func ValidateWithPaths(", "func validateWithPathsOriginal("),
            ],
            RECORDER,
            ["encoding/json", "os"],
        ),
        utils / "generate.go": patch(
            (utils / "generate.go").read_text(),
            [("func GenerateSampleSecrets(", "func generateSampleSecretsOriginal(")],
            GENERATED,
            [],
        ),
        reggen / "reggen.go": patch(
            (reggen / "reggen.go").read_text(),
            [("rand.NewSource(time.Now().UnixNano())", "rand.NewSource(nextSeed())")],
            SEED + "\nvar _ = time.Now\n",
            [],
        ),
    }
    for path, text in files.items():
        path.write_text(text)


if __name__ == "__main__":
    main()
