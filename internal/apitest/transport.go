package apitest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// CheckedTransport is an http.RoundTripper for a client under test (the Go client
// in package client, the CLI): it sends through the harness's HTTP client and
// checks every answer against api/openapi.yaml as Do does. An event stream is
// passed through unread (its frames are not JSON documents to validate).
func (h *Harness) CheckedTransport() http.RoundTripper {
	return checkedTransport{h: h, next: h.HTTP.Transport}
}

type checkedTransport struct {
	h    *Harness
	next http.RoundTripper
}

func (t checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	checkAgainstOpenAPI(t.h.T, req, resp, body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
