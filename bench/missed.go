package bench

import (
	"errors"

	"github.com/latscope/latscope/session"
)

// Missed is a bench command's result once its report is written:
// the write's error, else a failure (session.Failed) when a target was missed.
func Missed(err error, met bool, what string) error {
	if err != nil || met {
		return err
	}
	return session.Exit(session.Failed, errors.New(what+": a target was missed (see MISSED above)"))
}
