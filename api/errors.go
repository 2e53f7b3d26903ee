package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
)

// maxBodyBytes caps request bodies; larger ones get 413.
const maxBodyBytes = 64 << 10

// httpError is the JSON body of every error response:
// {"error": {"code": "...", "message": "...", "field": "..."}}.
type httpError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Channel names the channel a render_failed or content_too_large is about.
	Channel herald.Channel `json:"channel,omitempty"`
	// Missing lists the data variables a template needs but the request lacks.
	Missing []string `json:"missing,omitempty"`
}

func (e *httpError) Error() string { return e.Message }

func badField(field, code, format string, args ...any) *httpError {
	return &httpError{Status: http.StatusBadRequest, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(what string) *httpError {
	return &httpError{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

// responder writes the error answers of a room or a middleware; every one
// embeds it.
type responder struct {
	log *slog.Logger
}

// abort writes err as the response. Anything that is not an *httpError is logged and
// answered with a generic 500 that leaks nothing.
func (r responder) abort(c *gin.Context, err error) {
	var e *httpError
	if !errors.As(err, &e) {
		r.log.Error("request failed", "method", c.Request.Method, "path", c.FullPath(), "error", err)
		e = &httpError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the request can be retried"}
	}
	c.Set(errorCodeKey, e.Code)
	c.AbortWithStatusJSON(e.Status, gin.H{"error": e})
}

// errorCodeKey holds the error code of an aborted request (metrics read it).
const errorCodeKey = "herald.error_code"

// decodeJSON reads a bounded JSON object body into dst, rejecting unknown fields,
// wrong types, trailing data, oversized bodies and strings no channel or column
// can carry (checkBodyText) with errors that name the problem.
func decodeJSON(c *gin.Context, dst any) error {
	return decodeJSONLimit(c, dst, maxBodyBytes)
}

// decodeJSONLimit is decodeJSON with a body limit of max bytes.
func decodeJSONLimit(c *gin.Context, dst any, max int64) error {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("request body exceeds %d bytes", max)}
		}
		return &httpError{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read request body"}
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		return &httpError{Status: http.StatusBadRequest, Code: "malformed_json", Message: "request body is empty; expected a JSON object"}
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if !jsondecode.OnlySpaceLeft(dec, raw) {
		return &httpError{Status: http.StatusBadRequest, Code: "malformed_json", Message: "unexpected data after the JSON object"}
	}
	if err := checkBodyText(raw); err != nil {
		return err
	}
	return nil
}

// jsonError answers a body that does not decode: 400 naming the problem.
func jsonError(err error) *httpError { return fieldError(jsondecode.Explain(err)) }

// fieldError is a 400 for a problem named by field (a body's, or a provider
// config's as the provider's Validate reported it).
func fieldError(e *jsondecode.Error) *httpError {
	return &httpError{Status: http.StatusBadRequest, Code: e.Code, Field: e.Field, Message: e.Message}
}
