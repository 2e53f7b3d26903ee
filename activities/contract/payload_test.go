package contract

import (
	"errors"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

// The bound counts what Temporal carries: JSON, where '<' takes six bytes.
func TestCheckRenderedCountsTheJSONTemporalCarries(t *testing.T) {
	inApp := func(body string) templates.Rendered {
		return templates.Rendered{Channel: herald.ChannelInApp, InApp: &templates.RenderedInApp{Body: body}}
	}
	if err := CheckRendered(inApp(strings.Repeat("a", 256<<10))); err != nil {
		t.Fatalf("256 KiB of text: %v", err)
	}
	err := CheckRendered(inApp(strings.Repeat("<", 100<<10)))
	var big *ContentTooLargeError
	if !errors.As(err, &big) || big.Channel != herald.ChannelInApp || big.Bytes <= MaxRenderedBytes {
		t.Fatalf("100 KiB of '<' is 600 KiB as JSON: got %v", err)
	}
	if !strings.Contains(err.Error(), "in_app") || !strings.Contains(err.Error(), "524288") {
		t.Errorf("the message names the channel and the limit: %v", err)
	}
	if n := PayloadSize(map[string]string{"s": "<&>"}); n != len(`{"s":"\u003c\u0026\u003e"}`) {
		t.Errorf("PayloadSize = %d", n)
	}
}
