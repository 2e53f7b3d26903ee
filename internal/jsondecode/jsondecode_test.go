package jsondecode_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/jsondecode"
)

func TestObjectNamesTheFullPath(t *testing.T) {
	type settings struct {
		From string `json:"from"`
		Port int    `json:"port"`
	}
	for raw, want := range map[string]jsondecode.Error{
		`"x"`:             {Field: "settings", Code: "invalid_type", Message: "settings must be an object"},
		`{"form":"a"}`:    {Field: "settings.form", Code: "unknown_field", Message: `unknown field "form" in settings`},
		`{"port":"25"}`:   {Field: "settings.port", Code: "invalid_type", Message: "settings.port must be an integer, not string"},
		`{"from":"a"`:     {Field: "settings", Code: "malformed_json", Message: "malformed JSON: unexpected end of input"},
		`{"from":"a"}`:    {},
		`{"from":"a",}  `: {Field: "settings", Code: "malformed_json"},
	} {
		var s settings
		got := jsondecode.Object(json.RawMessage(raw), "settings", &s)
		switch {
		case want == (jsondecode.Error{}):
			if got != nil {
				t.Errorf("%s: %+v", raw, *got)
			}
		case got == nil:
			t.Errorf("%s: accepted", raw)
		case got.Field != want.Field || got.Code != want.Code || (want.Message != "" && got.Message != want.Message):
			t.Errorf("%s: got %+v, want %+v", raw, *got, want)
		}
	}
}

func TestOnlySpaceLeft(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":1}`: true, "{\"a\":1} \t\r\n": true, `{"a":1}}`: false, `{"a":1}]junk`: false, `{"a":1} {}`: false, `[1]]`: false,
	} {
		dec := json.NewDecoder(strings.NewReader(raw))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got := jsondecode.OnlySpaceLeft(dec, []byte(raw)); got != want {
			t.Errorf("OnlySpaceLeft(%q) = %t, want %t", raw, got, want)
		}
	}
}
