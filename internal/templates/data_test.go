package templates

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

func TestCheckNumber(t *testing.T) {
	for _, tc := range []struct {
		n  string
		ok bool
	}{
		{"0", true}, {"-0", true}, {"42", true}, {"9007199254740993", true},
		{"123456789012345678901234567890", true}, {"-123456789012345678901234567890", true},
		{"0.1", true}, {"19.90", true}, {"1e3", true}, {"1E+3", true}, {"12345678.9", true},
		{"0.30000000000000004", true}, {"5e-324", true}, {"1.7976931348623157e308", true},
		{"0.0e99999999999999999999", true}, {"-0.0", true},
		{"1e999", false}, {"-1e999", false}, {"1e-400", false}, {"2e-324", false},
		{"0.1000000000000000055511151231257827", false}, {"123456789012345678901.5", false},
		{"9007199254740993.0", false}, {"1e-99999999999999999999", false},
	} {
		err := CheckNumber(json.Number(tc.n))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInexactNumber)) {
			t.Errorf("CheckNumber(%s) = %v, want ok=%v", tc.n, err, tc.ok)
		}
	}
}

// Numbers render as the client wrote their value: integers digit for digit,
// other numbers in plain decimal notation (never 1.23456789e+07), and still as
// numbers for printf and comparisons.
func TestRenderNumbersExactly(t *testing.T) {
	tpl := Template{Category: "c", SMS: &SMSContent{Text: `{{.i}} {{.big}} {{.f}} {{.e}} {{.small}} {{.price}} {{printf "%.2f" .price}} {{if gt .price 10.0}}gt{{end}} {{printf "%v" .f}}`}}
	var data Data
	if err := json.Unmarshal([]byte(`{"i":9007199254740993,"big":123456789012345678901234567890,"f":12345678.9,"e":1e3,"small":0.00001,"price":19.90}`), &data); err != nil {
		t.Fatal(err)
	}
	r, err := Render(tpl, herald.ChannelSMS, "en", data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.SMS.Text, "9007199254740993 123456789012345678901234567890 12345678.9 1000 0.00001 19.9 19.90 gt 12345678.9"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
}

// Data survives a JSON round trip (how Temporal carries it) with every number's text.
func TestDataKeepsNumbersThroughJSON(t *testing.T) {
	in := `{"a":9007199254740993,"b":{"c":[1.10,2e2]},"d":null}`
	var d Data
	if err := json.Unmarshal([]byte(in), &d); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("round trip = %s, want %s", out, in)
	}
	var inStruct struct{ Data Data }
	if err := json.Unmarshal([]byte(`{"Data":{"n":18446744073709551616}}`), &inStruct); err != nil || inStruct.Data["n"] != json.Number("18446744073709551616") {
		t.Errorf("a Data field decodes with UseNumber: %v %#v", err, inStruct.Data)
	}
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{{"", true}, {"héllo ✓", true}, {"\uFFFD", true}, {"a\x00b", false}, {"caf\xc3", false}, {"\xff", false}} {
		if err := CheckText(tc.s); (err == nil) != tc.ok {
			t.Errorf("CheckText(%q) = %v, want ok=%v", tc.s, err, tc.ok)
		}
	}
}

// A template that produces a NUL or cuts a character in half fails to render
// (the inbox insert would otherwise fail and be retried for a day).
func TestRenderRefusesTextNoChannelCanCarry(t *testing.T) {
	for _, src := range []string{`a{{"\x00"}}b`, `{{printf "%c" 0}}`, `{{slice .name 0 1}}`} {
		tpl := Template{Category: "c", InApp: &InAppContent{Body: src}}
		_, err := Render(tpl, herald.ChannelInApp, "en", map[string]any{"name": "émile"})
		var re *RenderError
		if !errors.Is(err, ErrInvalidText) || !errors.As(err, &re) || re.Field != "body" {
			t.Errorf("%s: err = %v, want ErrInvalidText in in_app.body", src, err)
		}
	}
}
