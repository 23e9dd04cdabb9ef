package event

import "unsafe"

// Approximate sizes (bytes on a 64-bit build) of what an Event points to.
// Size only needs to be right to within a small factor: it bounds buffers
// by memory, it does not measure it.
const (
	sizeEnvelope = int64(unsafe.Sizeof(Event{}))
	sizeRequest  = int64(unsafe.Sizeof(Request{}))
	sizeChunk    = int64(unsafe.Sizeof(Chunk{}))
	sizeStage    = int64(unsafe.Sizeof(StageTiming{}))
	sizeTiming   = int64(unsafe.Sizeof(ServerTiming{}))
	// sizeSmall stands for any other payload: samples, markers, headers,
	// spans and losses are a few hundred bytes (a GPU sample with its
	// devices, a server sample with its maps: under a few KB).
	sizeSmall = 512
	// sizeMapEntry is one entry of a sample's or marker's map, with its key.
	sizeMapEntry = 64
)

// Size is roughly how many bytes the event holds in memory: its envelope
// and payload, and for a request its chunks (16 bytes each: a request of
// 65,536 chunks is about 1 MiB) and stages. The fan-out bounds each
// consumer's buffer by it; it costs a few additions, no allocation.
func (e Event) Size() int64 {
	n := sizeEnvelope
	switch {
	case e.Request != nil:
		r := e.Request
		n += sizeRequest + int64(cap(r.Chunks))*sizeChunk +
			int64(len(r.Stages)+len(r.Breakdown))*sizeStage +
			int64(len(r.ID)+len(r.TraceID)+len(r.SpanID)+len(r.Target)+len(r.Model)+len(r.Error)) +
			16*int64(len(r.Flags))
		if r.Server != nil {
			n += sizeTiming
		}
	case e.Server != nil:
		n += sizeSmall + int64(len(e.Server.Stages)+len(e.Server.Gauges))*sizeMapEntry
		for _, h := range e.Server.Stages {
			n += 8 * int64(len(h.Bounds)+len(h.Counts))
		}
	case e.GPU != nil:
		n += sizeSmall + int64(len(e.GPU.Devices))*sizeSmall
	case e.Marker != nil:
		n += sizeSmall + int64(len(e.Marker.Values))*sizeMapEntry + int64(len(e.Marker.RequestIDs))*32
	case e.Probe != nil:
		p := e.Probe
		n += sizeSmall + int64(len(p.SendLags))*16 + int64(len(p.Late))*48 + int64(len(p.Sent))*64
	default:
		n += sizeSmall
	}
	return n
}
