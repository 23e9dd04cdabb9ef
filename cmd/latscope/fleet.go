package main

import (
	"github.com/latscope/latscope/fleet"
	"github.com/latscope/latscope/tui"
)

// fleetView is the dashboard's fleet view: the one merger attach feeds
// (fleet.Fleet, which --json and the final summary read too), whose
// snapshot holds the requests sample of its timeline.
type fleetView struct {
	merged *fleet.Fleet
}

// newFleetView returns the merger.
func newFleetView() *fleetView {
	return &fleetView{merged: fleet.New(fleet.Config{})}
}

// frame is the fleet's frame, and a version that moves with every event
// the fleet takes.
func (v *fleetView) frame() (tui.Frame, uint64) {
	snap, version := v.merged.Snapshot()
	return tui.Frame{Snapshot: snap}, version
}
