module otelhooks.local/secret-heldout

go 1.26.3

require (
	github.com/aquasecurity/trivy v0.74.0
	github.com/bmatcuk/doublestar/v4 v4.10.0
	github.com/samber/lo v1.53.0
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/fatih/color v1.19.0 // indirect
	github.com/google/go-containerregistry v0.21.9 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/package-url/packageurl-go v0.1.6 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	k8s.io/utils v0.0.0-20260319190234-28399d86e0b5 // indirect
)
