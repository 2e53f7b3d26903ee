package api

import (
	"encoding/json"
	"testing"
)

func TestDecodeData(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		field string // "" when accepted
		code  string
	}{
		{``, "", ""},
		{`null`, "", ""},
		{`{}`, "", ""},
		{`{"a":{"b":[1,"x",true,null,{"c":9007199254740993}]},"price":19.90,"big":123456789012345678901234567890}`, "", ""},
		{`{"s":"\ufffd sent as such"}`, "", ""},
		{`{"s":"\ud83d\ude00 a pair"}`, "", ""},
		{`{"s":"😀 \" \\ \/ \n"}`, "", ""},
		{`[1]`, "data", "invalid_type"},
		{`"x"`, "data", "invalid_type"},
		{`{"x":1e999}`, "data.x", "invalid_field"},
		{`{"x":-1e999}`, "data.x", "invalid_field"},
		{`{"x":1e-400}`, "data.x", "invalid_field"},
		{`{"x":0.1000000000000000055511151231257827}`, "data.x", "invalid_field"},
		{`{"order":{"items":[{"n":1},{"n":1e999}]}}`, "data.order.items[1].n", "invalid_field"},
		{`{"body":"a\u0000b"}`, "data.body", "invalid_field"},
		{`{"a":["ok","a\u0000b"]}`, "data.a[1]", "invalid_field"},
		{`{"a\u0000":1}`, `data["a\u0000"]`, "invalid_field"},
		{`{"a b":{"c":"\u0000"}}`, `data["a b"].c`, "invalid_field"},
		{"{\"s\":\"caf\xc3\"}", "data.s", "invalid_field"},
		{"{\"caf\xc3\":1}", `data["caf` + "\ufffd" + `"]`, "invalid_field"},
		{`{"s":"\ud800"}`, "data.s", "invalid_field"},
		{`{"s":"x\udc00y"}`, "data.s", "invalid_field"},
		{`{"s":"\ud800\u0041"}`, "data.s", "invalid_field"},
		{`{"s":"\\ud800 is text, not an escape"}`, "", ""},
		{`{"s":"\ufffd\\ud800 is text too"}`, "", ""},
	} {
		d, err := decodeData(json.RawMessage(tc.raw))
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.raw, err)
		case tc.field == "" && d == nil:
			t.Errorf("%s: nil data", tc.raw)
		case tc.field != "" && err == nil:
			t.Errorf("%s: accepted, want %s %s", tc.raw, tc.field, tc.code)
		case tc.field != "" && (err.Field != tc.field || err.Code != tc.code || err.Status != 400):
			t.Errorf("%s: got %d %s %q (%s), want %s %q", tc.raw, err.Status, err.Code, err.Field, err.Message, tc.code, tc.field)
		}
	}
	d, err := decodeData(json.RawMessage(`{"n":9007199254740993,"f":1.50}`))
	if err != nil || d["n"] != json.Number("9007199254740993") || d["f"] != json.Number("1.50") {
		t.Errorf("numbers must stay json.Number: %#v %v", d, err)
	}
}

func TestCheckBodyText(t *testing.T) {
	for _, tc := range []struct{ raw, field string }{
		{`{"name":"Ada","n":1e999}`, ""}, // numbers are decodeData's business
		{`{"name":"a\\u0000b is text"}`, ""},
		{`{"name":"a\u0000b"}`, "name"},
		{`{"in_app":{"body":"x\u0000"}}`, "in_app.body"},
		{`{"locales":{"de":{"sms":{"text":"\udc00"}}}}`, "locales.de.sms.text"},
		{`{"categories":{"a\u0000":{"enabled":false}}}`, `categories["a\u0000"]`},
		{"{\"name\":\"caf\xc3\"}", "name"},
		{`{"data":{"list":[1,"\u0000"]}}`, "data.list[1]"},
	} {
		err := checkBodyText([]byte(tc.raw))
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.raw, err)
		case tc.field != "" && (err == nil || err.Field != tc.field || err.Code != "invalid_field"):
			t.Errorf("%s: got %+v, want invalid_field %q", tc.raw, err, tc.field)
		}
	}
}
