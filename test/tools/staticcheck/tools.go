//go:build tools

// Package staticcheck pins honnef.co/go/tools for `make staticcheck`.
package staticcheck

import _ "honnef.co/go/tools/cmd/staticcheck"
