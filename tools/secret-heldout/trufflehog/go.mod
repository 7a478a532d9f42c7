module otelhooks.local/secret-heldout/trufflehog

go 1.26.3
