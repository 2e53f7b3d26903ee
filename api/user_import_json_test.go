package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/mail"
	"reflect"
	"regexp"
	"testing"
	"unicode/utf8"
)

// slowImportLine decodes line as the import's encoding/json path does; ok is
// false when that path refuses it.
func slowImportLine(line []byte) (importLine, bool) {
	var in importLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() || in.UserID == nil {
		return in, false
	}
	return in, true
}

// checkFastImportLine fails when decodeFast accepts a line encoding/json
// refuses or decodes to other values.
func checkFastImportLine(t *testing.T, line []byte) (accepted bool) {
	t.Helper()
	var f importFast
	if !decodeFast(line, &f) {
		return false
	}
	in, ok := slowImportLine(line)
	if !ok {
		t.Fatalf("%q: the fast path accepts what encoding/json refuses", line)
	}
	str := func(k int) *string {
		if f.set[k] {
			return &f.profile[k]
		}
		return nil
	}
	got := []*string{str(fieldUserID), str(fieldName), str(fieldEmail), str(fieldPhone), str(fieldLocale), str(fieldTimezone)}
	want := []*string{in.UserID, in.Name, in.Email, in.Phone, in.Locale, in.Timezone}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: profile %v, encoding/json %v", line, got, want)
	}
	if f.hasTopics != (in.Topics != nil) || len(f.topics) != len(in.Topics) || (len(in.Topics) > 0 && !reflect.DeepEqual(f.topics, in.Topics)) {
		t.Fatalf("%q: topics %q (%v), encoding/json %q", line, f.topics, f.hasTopics, in.Topics)
	}
	wantPrefs := bytes.TrimSpace(in.Preferences)
	if string(wantPrefs) == "null" {
		wantPrefs = nil
	}
	if !bytes.Equal(f.preferences, wantPrefs) {
		t.Fatalf("%q: preferences %q, encoding/json %q", line, f.preferences, wantPrefs)
	}
	return true
}

// TestImportFastJSON: the import's fast decoder takes the common lines and
// agrees with encoding/json on them; every other line is left to
// encoding/json.
func TestImportFastJSON(t *testing.T) {
	for _, c := range []struct {
		line string
		fast bool
	}{
		{`{"user_id":"u1","name":"Ada Lovelace","email":"ada@example.com","phone":"+14155550100","locale":"en-GB","timezone":"Europe/London"}`, true},
		{` { "user_id" : "u1" , "name" : null , "topics" : [ "a" , "b" ] } `, true},
		{`{"user_id":"u1","topics":[]}`, true},
		{`{"user_id":"u1","topics":null}`, true},
		{`{"user_id":"u1","preferences":{"categories":{"m":{"enabled":false}},"channels":{"sms":true}}}`, true},
		{`{"user_id":"u1","preferences":{"a":"}{\"]"}}`, true},
		{`{"user_id":"u1","preferences":null,"name":"Zoë 東京"}`, true},
		{`{"user_id":"u1","name":"a","name":null}`, true},
		{`{"user_id":"u1","user_id":"u2"}`, true},
		// Left to encoding/json.
		{`{"user_id":"u1","name":"tab\there"}`, false},
		{`{"USER_ID":"u1"}`, false},
		{`{"user_id":"u1","shoe_size":42}`, false},
		{`{"user_id":42}`, false},
		{`{"user_id":"u1","name":nul}`, false},
		{`{"user_id":"u1","name":nullx}`, false},
		{`{"user_id":"u1"} {"user_id":"u2"}`, false},
		{`{"user_id":"u1",}`, false},
		{`{"user_id":null}`, false},
		{`{"name":"x"}`, false},
		{`{}`, false},
		{`[]`, false},
		{`{"user_id":"u1","topics":["a",1]}`, false},
		{`{"user_id":"u1","topics":["a",]}`, false},
		{`{"user_id":"u1","preferences":{"a":}}`, false},
		{`{"user_id":"u1","preferences":{"a":1}`, false},
		{`{"user_id":"u1","preferences":[1]}`, false},
		{`{"user_id":"u1","push_tokens":[{"token":"t","platform":"ios"}]}`, false},
		{`{"user_id":"u1"`, false},
		{`{"user_id":"u1`, false},
	} {
		if got := checkFastImportLine(t, []byte(c.line)); got != c.fast {
			t.Errorf("%s: fast path %v, want %v", c.line, got, c.fast)
		}
	}
}

// FuzzImportFastJSON: whatever the fast decoder accepts, encoding/json decodes
// to the same values (go test -run '^$' -fuzz FuzzImportFastJSON ./api/).
func FuzzImportFastJSON(f *testing.F) {
	for _, s := range []string{
		`{"user_id":"u1","name":"Ada","email":"ada@example.com","topics":["a","b"],"preferences":{"x":{"y":[1,"}"]}}}`,
		`{"user_id":"u1","name":null}`, `{"user_id":"u1","topics":[]}`, `{"user_id":"u1","Name":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !utf8.Valid(line) || bytes.IndexByte(line, 0) >= 0 {
			return // importReader.Next refuses such a line before decoding it
		}
		checkFastImportLine(t, line)
	})
}

// TestIsDotAtomAddress: every address the fast path accepts, net/mail accepts
// as it is (the fast path never lets through what validEmail refused before).
func TestIsDotAtomAddress(t *testing.T) {
	netMail := func(v string) bool {
		addr, err := mail.ParseAddress(v)
		return err == nil && addr.Address == v
	}
	cases := []string{"ada@example.com", "a.b@example.com", "a..b@example.com", ".a@example.com", "a.@example.com",
		"a@example", "a@.example.com", "a@example.com.", "a@example..com", "@example.com", "a@", "a@@b", "a@b@c",
		"ada+tag@ex-ample.co.uk", "o'neil@example.com", "{x}|~@example.com", "a b@example.com", `"a"@example.com`,
		"a@[127.0.0.1]", "Ada <ada@example.com>", "ädä@example.com", "a@exämple.com", "a\b@example.com", "a,b@example.com",
		"a@-example.com", "a@example-.com", "", "@", ".", "a", "a@b", "a(c)@example.com", "a@example.com\n"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab.@-+_'\"(),:;<>[] ~ä"
	for range 200_000 {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	accepted := 0
	for _, v := range cases {
		if isDotAtomAddress(v) {
			accepted++
			if !netMail(v) {
				t.Errorf("%q: the fast path accepts it, net/mail does not", v)
			}
		}
	}
	if accepted < 100 {
		t.Fatalf("the fast path accepted only %d of %d addresses", accepted, len(cases))
	}
	for _, v := range []string{"ada@example.com", "a.b-c+d@mail.example.org", "x@y"} {
		if !isDotAtomAddress(v) {
			t.Errorf("%q: not taken by the fast path", v)
		}
	}
}

// TestIsE164 agrees with the regexp it replaces.
func TestIsE164(t *testing.T) {
	re := regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	for _, v := range []string{"+14155550100", "+1234567", "+123456", "+123456789012345", "+1234567890123456", "+0234567",
		"14155550100", "+1415555010a", "+1415555010\n", "", "+", "++14155550100", "+١٢٣٤٥٦٧٨"} {
		if isE164(v) != re.MatchString(v) {
			t.Errorf("%q: isE164 %v, regexp %v", v, isE164(v), re.MatchString(v))
		}
	}
}
