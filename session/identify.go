package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/latscope/latscope/probe"
)

// identity is what the session measures: the server kind, the dialect and
// the model.
type identity struct {
	server, dialect, model string
}

// identify settles the dialect and model: as given, or asked of the server.
// With --dialect auto, a server that cannot be identified is an error that
// says why; with a named dialect that needs a model and no --model, so is a
// server that lists none.
func identify(ctx context.Context, conn *Connection, ep probe.Endpoint, dialect, model string) (identity, error) {
	id := identity{server: "unknown", dialect: dialect, model: model}
	if dialect != "auto" && model != "" {
		return id, nil
	}
	det, err := probe.Detect(ctx, ep)
	if ierr := interrupted(ctx, "finding out what server runs at "+conn.Shown); ierr != nil {
		return id, ierr
	}
	if err == nil {
		id.server = det.Server
		if id.dialect == "auto" {
			id.dialect = det.Dialect
		}
		if id.model == "" && len(det.Models) > 0 {
			id.model = det.Models[0]
		}
	}
	switch {
	case err != nil && dialect == "auto":
		return id, fmt.Errorf("find out what server runs at %s: %w%s", conn.Shown, err, detectHint(err))
	case id.model != "" || !probe.DialectNeedsModel(id.dialect):
		return id, nil
	case err != nil:
		return id, fmt.Errorf("--dialect %s needs a model: none given with --model, and the server's model list could not be read: %w%s",
			id.dialect, err, detectHint(err))
	}
	if dialect == "auto" {
		return id, fmt.Errorf("the %s server at %s lists no model; give one with --model", id.server, conn.Shown)
	}
	return id, fmt.Errorf("--dialect %s needs a model: none given with --model, and the server lists none; give one with --model", id.dialect)
}

// detectHint says what the user can do about a failed detection, where a
// flag can help.
func detectHint(err error) string {
	switch {
	case errors.Is(err, probe.ErrUnauthorized):
		return " (give the key with --api-key or --header)"
	case errors.Is(err, probe.ErrNoAnswer):
		return " (raise --timeout if the server is only slow)"
	case errors.Is(err, probe.ErrUnknownServer):
		return " (name the API with --dialect, and --model)"
	}
	return ""
}

// preparePrompts builds the prompt source, calibrated with the server's
// tokenize endpoint when it has one. A tokenizer that fails, before or
// during calibration, is not fatal: lengths are then assumed (~1 token per
// word) and corrected from the usage the server reports, and a line says so.
func preparePrompts(ctx context.Context, stderr io.Writer, ep probe.Endpoint, model string, cfg probe.PromptConfig) (*probe.PromptSource, error) {
	const assumed = "prompt lengths are assumed ~1 token/word and corrected from usage"
	tok, err := probe.DetectTokenizer(ctx, ep, model)
	if ierr := interrupted(ctx, "looking for a tokenize endpoint"); ierr != nil {
		return nil, ierr
	}
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(stderr, "latscope: no usable tokenize endpoint (%s); %s\n", first, assumed)
	} else {
		cfg.Tokenizer = tok
	}
	prompts, err := probe.NewPromptSource(ctx, cfg)
	if ierr := interrupted(ctx, "calibrating the prompts"); ierr != nil {
		return nil, ierr
	}
	if errors.Is(err, probe.ErrTokenizer) {
		fmt.Fprintf(stderr, "latscope: the tokenize endpoint failed during calibration (%v); %s\n", err, assumed)
		cfg.Tokenizer = nil
		prompts, err = probe.NewPromptSource(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("prepare prompts: %w", err)
	}
	return prompts, nil
}
