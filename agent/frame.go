package agent

import "strconv"

// The agent writes three kinds of SSE frame:
//
//	id: 42                      an event: its sequence id and its JSON
//	data: {"v":1,"kind":...}
//
//	event: end                  the agent's session is over; nothing follows
//	data: {}
//
//	: keep-alive                a comment, so proxies keep an idle stream open
//
// event.Marshal writes JSON on one line (encoding/json escapes newlines in
// strings), so one data line always holds the whole event.

// endEventType names the frame that ends the stream.
const endEventType = "end"

var (
	endFrame       = []byte("event: " + endEventType + "\ndata: {}\n\n")
	heartbeatFrame = []byte(": keep-alive\n\n")
)

// eventFrame renders one event with its id.
func eventFrame(id uint64, data []byte) []byte {
	b := make([]byte, 0, len("id: \ndata: \n\n")+20+len(data))
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
