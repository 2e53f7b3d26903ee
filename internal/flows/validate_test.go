package flows_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
)

// issueExample is the definition the product requires to be accepted exactly as
// written.
const issueExample = `{"category":"comments","steps":[{"type":"digest","window":"5s"},
{"type":"send","template_id":"comment_digest","channels":["in_app"]}]}`

func TestParseAcceptsTheIssueExampleAsWritten(t *testing.T) {
	def, err := flows.Parse([]byte(issueExample))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := flows.Definition{Category: "comments", Steps: []flows.Step{
		{Type: flows.StepDigest, Window: flows.Duration(5 * time.Second)},
		{Type: flows.StepSend, TemplateID: "comment_digest", Channels: []herald.Channel{herald.ChannelInApp}},
	}}
	got, _ := json.Marshal(def)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Fatalf("decoded %s, want %s", got, wantJSON)
	}
	// What is stored and shown is what the tenant wrote, with no defaults added.
	if string(got) != `{"category":"comments","steps":[{"type":"digest","window":"5s"},{"type":"send","template_id":"comment_digest","channels":["in_app"]}]}` {
		t.Fatalf("re-encoded as %s", got)
	}
}

// good are definitions Parse accepts: an example of each step kind and the
// edges of every bound.
var good = map[string]string{
	"send on two channels": `{"category":"orders","steps":[{"type":"send","template_id":"shipped","channels":["email","in_app"]}]}`,
	"delay by duration":    `{"category":"c","steps":[{"type":"delay","duration":"1h30m"},{"type":"send","template_id":"t","channels":["sms"]}]}`,
	"delay until 09:00":    `{"category":"c","steps":[{"type":"delay","until":"09:00"},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"delay of 30 days":     `{"category":"c","steps":[{"type":"delay","duration":"30d"},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"fixed digest with everything": `{"category":"c","steps":[{"type":"digest","id":"d","mode":"fixed","window":"30d","max_items":100000,
		"key":"{{.project}}/{{.thread_id}}","first":"send_now","items":100},{"type":"send","template_id":"t","channels":["in_app"]}]}`,
	"sliding digest": `{"category":"c","steps":[{"type":"digest","mode":"sliding","window":"10m","max_wait":"1h"},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"daily digest":   `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day","at":"09:00"}},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"weekly digest":  `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"week","at":"17:30","weekday":"friday"}},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"escalation": `{"category":"c","steps":[{"type":"send","id":"inbox","template_id":"t","channels":["in_app"]},
		{"type":"wait","step":"inbox","for":"seen","timeout":"1h"},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"wait for read, default for": `{"category":"c","steps":[{"type":"send","id":"a","template_id":"t","channels":["push","in_app"]},
		{"type":"wait","step":"a","timeout":"1s"},{"type":"wait","step":"a","for":"read","timeout":"2s"},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"throttle":      `{"category":"c","steps":[{"type":"throttle","limit":5,"window":"1h","key":"{{.thread_id}}"},{"type":"send","template_id":"t","channels":["push"]}]}`,
	"throttle edge": `{"category":"c","steps":[{"type":"throttle","limit":100000,"window":"1s"},{"type":"send","template_id":"t","channels":["push"]}]}`,
	"branch on data, user and an outcome": `{"category":"c","steps":[
		{"type":"send","id":"first","template_id":"t","channels":["in_app"]},
		{"type":"branch","id":"b","cases":[
			{"if":{"field":"data.order.total","op":"gte","value":100},"steps":[{"type":"send","template_id":"big","channels":["email"]}]},
			{"if":{"field":"user.locale","op":"in","value":["de","fr"]},"steps":[]},
			{"if":{"field":"steps.first.outcome","op":"eq","value":"sent"},"steps":[
				{"type":"wait","step":"first","timeout":"5m"},{"type":"send","template_id":"t","channels":["sms"]}]},
			{"if":{"field":"data.vip","op":"exists"},"steps":[{"type":"send","id":"inner","template_id":"t","channels":["in_app"]},
				{"type":"branch","cases":[{"if":{"field":"steps.inner.outcome","op":"ne","value":"failed"},"steps":[
					{"type":"wait","step":"inner","timeout":"1m"}]}]}]}],
		"else":[{"type":"delay","duration":"1m"},{"type":"send","template_id":"t","channels":["email"]}]},
		{"type":"branch","cases":[{"if":{"field":"steps.b.outcome","op":"eq","value":"done"},"steps":[]}]}]}`,
	"steps after the digest refer to steps after it": `{"category":"c","steps":[{"type":"digest","window":"1m"},
		{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"wait","step":"s","timeout":"1h"},{"type":"send","template_id":"t","channels":["email"]}]}`,
	"fields in any order, nulls as absent": `{"steps":[{"channels":["in_app"],"template_id":"t","type":"send","id":null}],"category":"c"}`,
	"50 steps":                             `{"category":"c","steps":[` + strings.Repeat(`{"type":"delay","duration":"1s"},`, 49) + `{"type":"send","template_id":"t","channels":["in_app"]}]}`,
}

func TestParseAcceptsGoodDefinitions(t *testing.T) {
	for name, raw := range good {
		t.Run(name, func(t *testing.T) {
			def, err := flows.Parse([]byte(raw))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			// What decodes validates again from its own encoding (the store keeps
			// the encoding; the engine reads it back).
			again, _ := json.Marshal(def)
			if _, err := flows.Parse(again); err != nil {
				t.Fatalf("re-encoded %s: %v", again, err)
			}
		})
	}
}

// bad are definitions Parse refuses, each with the exact field path and code.
var bad = []struct {
	name, raw, field, code string
}{
	// The document.
	{"not an object", `[]`, "", "malformed_json"},
	{"malformed", `{"category":`, "", "malformed_json"},
	{"trailing data", `{"category":"c","steps":[]} {}`, "", "malformed_json"},
	{"unknown top field", `{"category":"c","steps":[],"name":"x"}`, "name", "unknown_field"},
	{"category missing", `{"steps":[{"type":"send","template_id":"t","channels":["in_app"]}]}`, "category", "missing_field"},
	{"category bad", `{"category":"a b","steps":[{"type":"send","template_id":"t","channels":["in_app"]}]}`, "category", "invalid_field"},
	{"category wrong type", `{"category":7,"steps":[]}`, "category", "invalid_type"},
	{"no steps", `{"category":"c"}`, "steps", "missing_field"},
	{"empty steps", `{"category":"c","steps":[]}`, "steps", "missing_field"},
	{"steps not an array", `{"category":"c","steps":{}}`, "steps", "invalid_type"},
	{"no send step", `{"category":"c","steps":[{"type":"delay","duration":"1s"}]}`, "steps", "invalid_field"},
	{"51 steps", `{"category":"c","steps":[` + strings.Repeat(`{"type":"delay","duration":"1s"},`, 50) + `{"type":"send","template_id":"t","channels":["in_app"]}]}`, "steps[50]", "invalid_field"},
	{"51 steps counting nested", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists"},"steps":[` +
		strings.Repeat(`{"type":"delay","duration":"1s"},`, 48) + `{"type":"delay","duration":"1s"}]}]}]}`, "steps[1].cases[0].steps[48]", "invalid_field"},
	{"field given twice", `{"category":"c","category":"d","steps":[]}`, "category", "invalid_field"},

	// Any step.
	{"step not an object", `{"category":"c","steps":["send"]}`, "steps[0]", "invalid_type"},
	{"type missing", `{"category":"c","steps":[{"template_id":"t"}]}`, "steps[0].type", "missing_field"},
	{"type unknown", `{"category":"c","steps":[{"type":"email"}]}`, "steps[0].type", "invalid_field"},
	{"type unknown second", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},{"type":"email"}]}`, "steps[1].type", "invalid_field"},
	{"type not a string", `{"category":"c","steps":[{"type":1}]}`, "steps[0].type", "invalid_type"},
	{"field of another type", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"],"window":"5s"}]}`, "steps[0].window", "unknown_field"},
	{"field of another type, zero", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"],"limit":0}]}`, "steps[0].limit", "unknown_field"},
	{"field of no type", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"],"templateId":"x"}]}`, "steps[0].templateId", "unknown_field"},
	{"step field twice", `{"category":"c","steps":[{"type":"send","template_id":"t","template_id":"u","channels":["in_app"]}]}`, "steps[0].template_id", "invalid_field"},
	{"bad id", `{"category":"c","steps":[{"type":"send","id":"1a","template_id":"t","channels":["in_app"]}]}`, "steps[0].id", "invalid_field"},
	{"id with a dot", `{"category":"c","steps":[{"type":"send","id":"a.b","template_id":"t","channels":["in_app"]}]}`, "steps[0].id", "invalid_field"},
	{"duplicate id", `{"category":"c","steps":[{"type":"send","id":"a","template_id":"t","channels":["in_app"]},{"type":"delay","id":"a","duration":"1s"}]}`, "steps[1].id", "invalid_field"},
	{"duplicate id nested", `{"category":"c","steps":[{"type":"send","id":"a","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"data.x","op":"exists"},"steps":[{"type":"delay","id":"a","duration":"1s"}]}]}]}`, "steps[1].cases[0].steps[0].id", "invalid_field"},

	// send.
	{"send without template", `{"category":"c","steps":[{"type":"send","channels":["in_app"]}]}`, "steps[0].template_id", "missing_field"},
	{"send bad template id", `{"category":"c","steps":[{"type":"send","template_id":"a/b","channels":["in_app"]}]}`, "steps[0].template_id", "invalid_field"},
	{"send without channels", `{"category":"c","steps":[{"type":"send","template_id":"t"}]}`, "steps[0].channels", "missing_field"},
	{"send empty channels", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":[]}]}`, "steps[0].channels", "missing_field"},
	{"send unknown channel", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app","fax"]}]}`, "steps[0].channels[1]", "invalid_field"},
	{"send channel twice", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["sms","sms"]}]}`, "steps[0].channels[1]", "invalid_field"},
	{"send channels wrong type", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":"sms"}]}`, "steps[0].channels", "invalid_type"},

	// delay.
	{"delay with nothing", `{"category":"c","steps":[{"type":"delay"},{"type":"send","template_id":"t","channels":["in_app"]}]}`, "steps[0].duration", "missing_field"},
	{"delay with both", `{"category":"c","steps":[{"type":"delay","duration":"1h","until":"09:00"}]}`, "steps[0].until", "invalid_field"},
	{"delay bad duration", `{"category":"c","steps":[{"type":"delay","duration":"1 hour"}]}`, "steps[0].duration", "invalid_field"},
	{"delay duration not a string", `{"category":"c","steps":[{"type":"delay","duration":3600}]}`, "steps[0].duration", "invalid_field"},
	{"delay too long", `{"category":"c","steps":[{"type":"delay","duration":"31d"}]}`, "steps[0].duration", "invalid_field"},
	{"delay too short", `{"category":"c","steps":[{"type":"delay","duration":"500ms"}]}`, "steps[0].duration", "invalid_field"},
	{"delay negative", `{"category":"c","steps":[{"type":"delay","duration":"-5s"}]}`, "steps[0].duration", "invalid_field"},
	{"delay days overflow", `{"category":"c","steps":[{"type":"delay","duration":"9999999999999d"}]}`, "steps[0].duration", "invalid_field"},
	{"delay until 24:00", `{"category":"c","steps":[{"type":"delay","until":"24:00"}]}`, "steps[0].until", "invalid_field"},
	{"delay until 9:00", `{"category":"c","steps":[{"type":"delay","until":"9:00"}]}`, "steps[0].until", "invalid_field"},

	// digest.
	{"digest without window", `{"category":"c","steps":[{"type":"digest"}]}`, "steps[0].window", "missing_field"},
	{"digest window over 30 days", `{"category":"c","steps":[{"type":"digest","window":"721h1s"}]}`, "steps[0].window", "invalid_field"},
	{"digest window 31d", `{"category":"c","steps":[{"type":"digest","window":"31d"}]}`, "steps[0].window", "invalid_field"},
	{"digest window zero", `{"category":"c","steps":[{"type":"digest","window":"0s"}]}`, "steps[0].window", "missing_field"},
	{"digest unknown mode", `{"category":"c","steps":[{"type":"digest","mode":"rolling","window":"5s"}]}`, "steps[0].mode", "invalid_field"},
	{"fixed digest with max_wait", `{"category":"c","steps":[{"type":"digest","window":"5s","max_wait":"1m"}]}`, "steps[0].max_wait", "invalid_field"},
	{"sliding digest without max_wait", `{"category":"c","steps":[{"type":"digest","mode":"sliding","window":"5s"}]}`, "steps[0].max_wait", "missing_field"},
	{"sliding digest max_wait below window", `{"category":"c","steps":[{"type":"digest","mode":"sliding","window":"5m","max_wait":"1m"}]}`, "steps[0].max_wait", "invalid_field"},
	{"sliding digest max_wait over 30 days", `{"category":"c","steps":[{"type":"digest","mode":"sliding","window":"5m","max_wait":"40d"}]}`, "steps[0].max_wait", "invalid_field"},
	{"scheduled digest without schedule", `{"category":"c","steps":[{"type":"digest","mode":"scheduled"}]}`, "steps[0].schedule", "missing_field"},
	{"scheduled digest with window", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","window":"1h","schedule":{"every":"day","at":"09:00"}}]}`, "steps[0].window", "invalid_field"},
	{"fixed digest with schedule", `{"category":"c","steps":[{"type":"digest","window":"1h","schedule":{"every":"day","at":"09:00"}}]}`, "steps[0].schedule", "invalid_field"},
	{"schedule every month", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"month","at":"09:00"}}]}`, "steps[0].schedule.every", "invalid_field"},
	{"schedule without at", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day"}}]}`, "steps[0].schedule.at", "missing_field"},
	{"schedule bad at", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day","at":"9am"}}]}`, "steps[0].schedule.at", "invalid_field"},
	{"weekly schedule without weekday", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"week","at":"09:00"}}]}`, "steps[0].schedule.weekday", "invalid_field"},
	{"daily schedule with weekday", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day","at":"09:00","weekday":"monday"}}]}`, "steps[0].schedule.weekday", "invalid_field"},
	{"schedule unknown field", `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day","at":"09:00","tz":"UTC"}}]}`, "steps[0].schedule.tz", "unknown_field"},
	{"max_items over bound", `{"category":"c","steps":[{"type":"digest","window":"5s","max_items":100001}]}`, "steps[0].max_items", "invalid_field"},
	{"max_items negative", `{"category":"c","steps":[{"type":"digest","window":"5s","max_items":-1}]}`, "steps[0].max_items", "invalid_field"},
	{"max_items not an integer", `{"category":"c","steps":[{"type":"digest","window":"5s","max_items":1.5}]}`, "steps[0].max_items", "invalid_type"},
	{"max_items huge", `{"category":"c","steps":[{"type":"digest","window":"5s","max_items":1e30}]}`, "steps[0].max_items", "invalid_type"},
	{"items over bound", `{"category":"c","steps":[{"type":"digest","window":"5s","items":101}]}`, "steps[0].items", "invalid_field"},
	{"first unknown", `{"category":"c","steps":[{"type":"digest","window":"5s","first":"skip"}]}`, "steps[0].first", "invalid_field"},
	{"key with a function", `{"category":"c","steps":[{"type":"digest","window":"5s","key":"{{.a | printf \"%s\"}}"}]}`, "steps[0].key", "invalid_field"},
	{"key with range", `{"category":"c","steps":[{"type":"digest","window":"5s","key":"{{range .a}}x{{end}}"}]}`, "steps[0].key", "invalid_field"},
	{"key unclosed", `{"category":"c","steps":[{"type":"digest","window":"5s","key":"{{.a"}]}`, "steps[0].key", "invalid_field"},
	{"key too long", `{"category":"c","steps":[{"type":"digest","window":"5s","key":"` + strings.Repeat("a", 257) + `"}]}`, "steps[0].key", "invalid_field"},
	{"digest in a branch", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"data.x","op":"exists"},"steps":[{"type":"digest","window":"5s"}]}]}]}`, "steps[1].cases[0].steps[0].type", "invalid_field"},
	{"two digests", `{"category":"c","steps":[{"type":"digest","window":"5s"},{"type":"digest","window":"5s"}]}`, "steps[1].type", "invalid_field"},

	// wait.
	{"wait without step", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"wait","timeout":"1h"}]}`, "steps[1].step", "missing_field"},
	{"wait for a later step", `{"category":"c","steps":[{"type":"wait","step":"s","timeout":"1h"},{"type":"send","id":"s","template_id":"t","channels":["in_app"]}]}`, "steps[0].step", "invalid_field"},
	{"wait for an unknown step", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"wait","step":"x","timeout":"1h"}]}`, "steps[1].step", "invalid_field"},
	{"wait for a send without in_app", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["email"]},{"type":"wait","step":"s","timeout":"1h"}]}`, "steps[1].step", "invalid_field"},
	{"wait for a delay", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},{"type":"delay","id":"d","duration":"1s"},{"type":"wait","step":"d","timeout":"1h"}]}`, "steps[2].step", "invalid_field"},
	{"wait for a send in another case", `{"category":"c","steps":[{"type":"branch","cases":[
		{"if":{"field":"data.a","op":"exists"},"steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]}]},
		{"if":{"field":"data.b","op":"exists"},"steps":[{"type":"wait","step":"s","timeout":"1h"}]}]}]}`, "steps[0].cases[1].steps[0].step", "invalid_field"},
	{"wait for a send inside an earlier branch", `{"category":"c","steps":[{"type":"branch","cases":[
		{"if":{"field":"data.a","op":"exists"},"steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]}]}]},
		{"type":"wait","step":"s","timeout":"1h"}]}`, "steps[1].step", "invalid_field"},
	{"wait for a send before the digest", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"digest","window":"5s"},{"type":"wait","step":"s","timeout":"1h"}]}`, "steps[2].step", "invalid_field"},
	{"wait without timeout", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"wait","step":"s"}]}`, "steps[1].timeout", "missing_field"},
	{"wait timeout over bound", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"wait","step":"s","timeout":"31d"}]}`, "steps[1].timeout", "invalid_field"},
	{"wait for clicked", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},{"type":"wait","step":"s","for":"clicked","timeout":"1h"}]}`, "steps[1].for", "invalid_field"},

	// throttle.
	{"throttle without limit", `{"category":"c","steps":[{"type":"throttle","window":"1h"}]}`, "steps[0].limit", "missing_field"},
	{"throttle limit over bound", `{"category":"c","steps":[{"type":"throttle","limit":100001,"window":"1h"}]}`, "steps[0].limit", "invalid_field"},
	{"throttle negative limit", `{"category":"c","steps":[{"type":"throttle","limit":-5,"window":"1h"}]}`, "steps[0].limit", "invalid_field"},
	{"throttle without window", `{"category":"c","steps":[{"type":"throttle","limit":5}]}`, "steps[0].window", "missing_field"},
	{"throttle window over bound", `{"category":"c","steps":[{"type":"throttle","limit":5,"window":"60d"}]}`, "steps[0].window", "invalid_field"},
	{"throttle bad key", `{"category":"c","steps":[{"type":"throttle","limit":5,"window":"1h","key":"{{$x := 1}}"}]}`, "steps[0].key", "invalid_field"},

	// branch.
	{"branch without cases", `{"category":"c","steps":[{"type":"branch"}]}`, "steps[0].cases", "missing_field"},
	{"branch with 11 cases", `{"category":"c","steps":[{"type":"branch","cases":[` + strings.Repeat(`{"if":{"field":"data.a","op":"exists"},"steps":[]},`, 10) +
		`{"if":{"field":"data.a","op":"exists"},"steps":[]}]}]}`, "steps[0].cases", "invalid_field"},
	{"case unknown field", `{"category":"c","steps":[{"type":"branch","cases":[{"when":{}}]}]}`, "steps[0].cases[0].when", "unknown_field"},
	{"condition without field", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"op":"exists"},"steps":[]}]}]}`, "steps[0].cases[0].if.field", "missing_field"},
	{"condition unknown field", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists","path":"x"},"steps":[]}]}]}`, "steps[0].cases[0].if.path", "unknown_field"},
	{"condition on an unknown root", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"event.a","op":"exists"},"steps":[]}]}]}`, "steps[0].cases[0].if.field", "invalid_field"},
	{"condition on an empty data path", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a..b","op":"exists"},"steps":[]}]}]}`, "steps[0].cases[0].if.field", "invalid_field"},
	{"condition on an unknown user field", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"user.age","op":"exists"},"steps":[]}]}]}`, "steps[0].cases[0].if.field", "invalid_field"},
	{"condition on a later step", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"steps.s.outcome","op":"eq","value":"sent"},"steps":[]}]},
		{"type":"send","id":"s","template_id":"t","channels":["in_app"]}]}`, "steps[0].cases[0].if.field", "invalid_field"},
	{"condition on the branch itself", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},
		{"type":"branch","id":"b","cases":[{"if":{"field":"steps.b.outcome","op":"eq","value":"sent"},"steps":[]}]}]}`, "steps[1].cases[0].if.field", "invalid_field"},
	{"condition on a step's field other than outcome", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"steps.s.status","op":"eq","value":"sent"},"steps":[]}]}]}`, "steps[1].cases[0].if.field", "invalid_field"},
	{"condition without op", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a"},"steps":[]}]}]}`, "steps[0].cases[0].if.op", "missing_field"},
	{"condition unknown op", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"matches","value":"x"},"steps":[]}]}]}`, "steps[0].cases[0].if.op", "invalid_field"},
	{"eq without value", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"eq"},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "missing_field"},
	{"eq with an object", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"eq","value":{}},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "invalid_type"},
	{"exists with a value", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists","value":1},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "invalid_field"},
	{"gt with a string", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"gt","value":"10"},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "invalid_type"},
	{"in with a scalar", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"in","value":"x"},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "invalid_type"},
	{"in with an empty list", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"in","value":[]},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "invalid_field"},
	{"in with a nested list", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"in","value":["x",["y"]]},"steps":[]}]}]}`, "steps[0].cases[0].if.value[1]", "invalid_type"},
	{"outcome compared with a number", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"steps.s.outcome","op":"eq","value":1},"steps":[]}]}]}`, "steps[1].cases[0].if.value", "invalid_type"},
	{"outcome compared with gt", `{"category":"c","steps":[{"type":"send","id":"s","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"steps.s.outcome","op":"gt","value":1},"steps":[]}]}]}`, "steps[1].cases[0].if.op", "invalid_field"},
	{"value too long", `{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.a","op":"eq","value":"` + strings.Repeat("x", 1025) + `"},"steps":[]}]}]}`, "steps[0].cases[0].if.value", "invalid_field"},
	{"bad step in a case", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists"},"steps":[
		{"type":"send","template_id":"t","channels":["in_app"]},{"type":"send","channels":["in_app"]}]}]}]}`, "steps[1].cases[0].steps[1].template_id", "missing_field"},
	{"bad step in else", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists"},"steps":[]}],
		"else":[{"type":"digest","window":"5s"}]}]}`, "steps[1].else[0].type", "invalid_field"},
	{"window in a nested step", `{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]},{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists"},"steps":[
		{"type":"throttle","limit":1,"window":"1h"},{"type":"send","template_id":"t","channels":["in_app"],"window":"1h"}]}]}]}`, "steps[1].cases[0].steps[1].window", "unknown_field"},
}

func TestParseRefusesBadDefinitionsNamingTheField(t *testing.T) {
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := flows.Parse([]byte(tc.raw))
			var fe *jsondecode.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%s) = %v, want a *jsondecode.Error for %s", tc.raw, err, tc.field)
			}
			if fe.Field != tc.field || fe.Code != tc.code {
				t.Fatalf("got field %q code %q (%s), want field %q code %q", fe.Field, fe.Code, fe.Message, tc.field, tc.code)
			}
			if fe.Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

// Validate also refuses, by the same paths, definitions built in Go (the
// engine's tests build them so) that no JSON decoding has checked.
func TestValidateRefusesFieldsOfAnotherTypeInGo(t *testing.T) {
	for _, tc := range []struct {
		def   flows.Definition
		field string
	}{
		{flows.Definition{Category: "c", Steps: []flows.Step{{Type: flows.StepSend, TemplateID: "t", Channels: []herald.Channel{herald.ChannelInApp}, Limit: 3}}}, "steps[0].limit"},
		{flows.Definition{Category: "c", Steps: []flows.Step{{Type: flows.StepSend, TemplateID: "t", Channels: []herald.Channel{herald.ChannelInApp}},
			{Type: flows.StepBranch, Cases: []flows.Case{{If: flows.Condition{Field: "data.a", Op: flows.OpGt, Value: 3}, Steps: []flows.Step{
				{Type: flows.StepDelay, Duration: flows.Duration(time.Second), Window: flows.Duration(time.Second)}}}}}}}, "steps[1].cases[0].steps[0].window"},
		{flows.Definition{Category: "c", Steps: []flows.Step{{Type: "fax"}}}, "steps[0].type"},
	} {
		var fe *jsondecode.Error
		if err := flows.Validate(tc.def); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("Validate = %v, want an error naming %s", err, tc.field)
		}
	}
}

func TestWithDefaultsFillsWhatTheStepsLeaveOut(t *testing.T) {
	def, err := flows.Parse([]byte(`{"category":"c","steps":[{"type":"digest","window":"5s"},
		{"type":"send","id":"s","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"data.a","op":"exists"},"steps":[{"type":"wait","step":"s","timeout":"1m"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	full := def.WithDefaults()
	if d := full.Steps[0]; d.Mode != flows.DigestFixed || d.Items != flows.DefaultDigestItems {
		t.Errorf("digest defaults: %+v", d)
	}
	if w := full.Steps[2].Cases[0].Steps[0]; w.For != flows.WaitSeen {
		t.Errorf("wait default: %+v", w)
	}
	// The definition itself is unchanged (what is stored is what was written).
	if def.Steps[0].Mode != "" || def.Steps[2].Cases[0].Steps[0].For != "" {
		t.Errorf("WithDefaults changed its receiver: %+v", def)
	}
	if err := flows.Validate(full); err != nil {
		t.Errorf("the definition with defaults does not validate: %v", err)
	}
}

func TestDurationDays(t *testing.T) {
	for s, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour, "90s": 90 * time.Second, "1h30m": 90 * time.Minute} {
		d, err := flows.ParseDuration(s)
		if err != nil || d.D() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, d, err, want)
		}
	}
	for _, s := range []string{"", "d", "1.5d", "-1d", "3661d", "106752d", "1w"} {
		if _, err := flows.ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
	if s := flows.Duration(48 * time.Hour).String(); s != "2d" {
		t.Errorf("48h writes as %q", s)
	}
}

// A key that is not a plain name is refused naming the object it is in, so it
// cannot pose as another field's path.
func TestOddKeysCannotPoseAsPaths(t *testing.T) {
	for raw, field := range map[string]string{
		`{"category":"c","steps[0]":1}`: "",
		`{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"],"a.b":1}]}`:       "steps[0]",
		`{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"],"Window":"5s"}]}`: "steps[0].Window",
	} {
		_, err := flows.Parse([]byte(raw))
		var fe *jsondecode.Error
		if !errors.As(err, &fe) || fe.Code != "unknown_field" || fe.Field != field {
			t.Errorf("%s: %v, want unknown_field naming %q", raw, err, field)
		}
	}
}

// A definition followed by anything but whitespace is refused, also when what
// follows starts with '}' or ']' (json.Decoder.More is false before those).
func TestDecodeRefusesDataAfterTheObject(t *testing.T) {
	good := `{"steps":[{"type":"send","channels":["in_app"]}]}`
	if _, err := flows.Decode([]byte(good + " \n")); err != nil {
		t.Fatalf("trailing whitespace: %v", err)
	}
	for _, tail := range []string{"}", "]", "]junk", "}{}", " x"} {
		_, err := flows.Decode([]byte(good + tail))
		var e *jsondecode.Error
		if !errors.As(err, &e) || e.Code != "malformed_json" {
			t.Errorf("%q after the definition: %v, want malformed_json", tail, err)
		}
	}
}
