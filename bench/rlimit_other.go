//go:build !unix

package bench

// RaiseFileLimit has no open-file limit to raise here; 0 means unknown.
func RaiseFileLimit() (uint64, error) { return 0, nil }
