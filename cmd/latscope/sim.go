package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSimCmd is a placeholder until the sim package lands.
func newSimCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sim",
		Short: "Run the built-in simulated LLM server",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("not built yet")
		},
	}
}
