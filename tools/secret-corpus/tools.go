//go:build tools

// The secret corpus is built from gitleaks' rule definitions: the samples each rule is validated
// with (true positives, false positives). See scripts/install-secret-corpus.sh.
package tools

import _ "github.com/zricethezav/gitleaks/v8/cmd/generate/config/rules"
