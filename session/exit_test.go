package session

import (
	"context"
	"errors"
	"testing"
)

func TestDropErrorsLooksIntoNestedJoins(t *testing.T) {
	other := errors.New("disk full")
	err := errors.Join(errors.Join(nil, context.Canceled), nil, other)
	got := WithoutCancellation(err)
	if errors.Is(got, context.Canceled) || !errors.Is(got, other) {
		t.Fatalf("WithoutCancellation(%v) = %v: want only the other error", err, got)
	}
	if WithoutCancellation(errors.Join(errors.Join(context.Canceled))) != nil {
		t.Fatal("a nested cancellation alone must leave nothing")
	}
}
