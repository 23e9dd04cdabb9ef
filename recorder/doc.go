// Package recorder writes latscope sessions to files and plays them back.
//
// A recording keeps the raw events (event.Event) of one session, so that it
// can be aggregated again later, with other windows, exactly as it was live:
// a Writer records a lossless fan-out subscription, a Reader iterates the
// file's events, and Replay is a pipeline.Source that emits them again,
// paced by their own timestamps.
//
// # File format
//
// A recording is a sequence of Zstandard frames (RFC 8878), so standard
// tools read it: `zstdcat session.jsonl.zst | jq .` prints its events.
//
//  1. The first frame is a skippable frame (magic 0x184D2A50) holding one
//     JSON object, for example
//     {"magic":"latscope-recording","format":1,"schema":1}.
//     format is the version of this layout (FormatVersion); schema is the
//     event.SchemaVersion of the records. zstd decoders skip this frame;
//     latscope reads it first, to identify the file and to refuse one it
//     cannot read with a message that names both versions.
//  2. Every other frame is an ordinary zstd frame with a content checksum,
//     independent of the others (no shared window, no dictionary). Its
//     content is whole lines of JSON, one event per line, as event.Marshal
//     writes them; a line never spans two frames. Skippable frames after the
//     first are ignored, which leaves room for later additions.
//  3. The first event is the session header (kind "session"). The others
//     follow in the order they were recorded, which is not time order: a
//     request is stamped with its start but recorded when it ends.
//
// Writer.Record ends a frame at least once a second (and at about 1 MiB of
// JSON), and each frame goes to the operating system in one write. A process
// killed with SIGKILL therefore loses at most its last second, and the file
// still reads up to its last complete frame; the reader then returns a
// *TornTailError naming the byte offset where the incomplete frame begins.
// A damaged frame is reported with a *CorruptError naming its offset.
package recorder
