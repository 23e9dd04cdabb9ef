package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// childArg, as the first argument, makes the test binary act as the fast
// server child, so that ChildServer is tested by re-executing a real process.
const childArg = "latscope-bench-test-child"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		// Tokens per write arrives as the last two arguments.
		tpw := 1
		if n := len(os.Args); n >= 2 {
			fmt.Sscanf(os.Args[n-1], "%d", &tpw)
		}
		if err := ServeChild(context.Background(), "127.0.0.1:0", FastServer{TokensPerWrite: tpw}, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
