package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestBadRequests(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, Config{Profile: tinyProfile(t)})
	huge := `{"prompt":"` + strings.Repeat("a ", maxBodyBytes/2+10) + `"}`
	long := `{"prompt":"` + strings.Repeat("a ", 40000) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		param                    string
	}{
		{"bad json", "POST", "/v1/chat/completions", `{"messages":`, nil, 400, ""},
		{"empty body", "POST", "/v1/chat/completions", ``, nil, 400, ""},
		{"not an object", "POST", "/v1/completions", `[1,2]`, nil, 400, ""},
		{"max_tokens string", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":"x"}`, nil, 400, "max_tokens"},
		{"stream not bool", "POST", "/v1/completions", `{"prompt":"hi","stream":"yes"}`, nil, 400, "stream"},
		{"missing messages", "POST", "/v1/chat/completions", `{"model":"sim-7b"}`, nil, 400, "messages"},
		{"empty messages", "POST", "/v1/chat/completions", `{"messages":[]}`, nil, 400, "messages"},
		{"content wrong type", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, nil, 400, "messages[0].content"},
		{"image part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, nil, 400, "messages[0].content"},
		{"missing role", "POST", "/v1/chat/completions", `{"messages":[{"content":"hi"}]}`, nil, 400, "messages[0].role"},
		{"missing prompt", "POST", "/v1/completions", `{"max_tokens":3}`, nil, 400, "prompt"},
		{"empty prompt", "POST", "/v1/completions", `{"prompt":"  "}`, nil, 400, "prompt"},
		{"negative max_tokens", "POST", "/v1/completions", `{"prompt":"hi","max_tokens":-1}`, nil, 400, "max_tokens"},
		{"zero max_tokens", "POST", "/v1/completions", `{"prompt":"hi","max_tokens":0}`, nil, 400, "max_tokens"},
		{"absurd max_tokens", "POST", "/v1/completions", `{"prompt":"hi","max_tokens":1000000000}`, nil, 400, "max_tokens"},
		{"max_tokens overflow", "POST", "/v1/completions", `{"prompt":"hi","max_tokens":1e30}`, nil, 400, "max_tokens"},
		{"min over max", "POST", "/v1/completions", `{"prompt":"hi","max_tokens":2,"min_tokens":3}`, nil, 400, "min_tokens"},
		{"n=2", "POST", "/v1/completions", `{"prompt":"hi","n":2}`, nil, 400, "n"},
		{"stream_options without stream", "POST", "/v1/completions", `{"prompt":"hi","stream_options":{"include_usage":true}}`, nil, 400, "stream_options"},
		{"prompt over context", "POST", "/v1/completions", long, nil, 400, "messages"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, nil, 404, "model"},
		{"body too large", "POST", "/v1/completions", huge, nil, 413, ""},
		{"bad fault header", "POST", "/v1/completions", `{"prompt":"hi"}`, map[string]string{FaultHeader: "explode"}, 400, FaultHeader},
		{"bad request id", "POST", "/v1/completions", `{"prompt":"hi"}`, map[string]string{RequestIDHeader: "a b"}, 400, RequestIDHeader},
		{"wrong method", "GET", "/v1/chat/completions", ``, nil, 405, ""},
		{"unknown path", "POST", "/v2/whatever", `{}`, nil, 404, ""},
		{"tokenize nothing", "POST", "/tokenize", `{}`, nil, 400, "prompt"},
		{"tokenize both", "POST", "/tokenize", `{"prompt":"a","messages":[]}`, nil, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, url+tc.path, bytes.NewReader([]byte(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			var got struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   any    `json:"param"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &got); err != nil || got.Error == nil || got.Error.Message == "" {
				t.Fatalf("error body %q: %v", b, err)
			}
			if got.Error.Code != tc.status || (tc.status < 500 && got.Error.Type != "invalid_request_error") {
				t.Errorf("error = %+v", got.Error)
			}
			if tc.param != "" && got.Error.Param != tc.param {
				t.Errorf("param = %v, want %q", got.Error.Param, tc.param)
			}
		})
	}
}
