package store

import "testing"

// TestImportRowEncoding: a row in COPY text format, escaped, with a topic named
// twice written once (the subscriptions' INSERT has no DISTINCT).
func TestImportRowEncoding(t *testing.T) {
	name := "tab\there \\N"
	r := ImportRow{UserID: "u1", Name: &name, Preferences: []byte(`{"a":"b\nc"}`),
		Topics: []string{"news", `q"uote`, "news", "deals", `q"uote`}}
	var used ImportSections
	b := appendProfile(nil, &r)
	b, err := appendSections(b, &r, &used)
	if err != nil {
		t.Fatal(err)
	}
	want := `u1	tab\there \\N	\N	\N	\N	\N	{"a":"b\\nc"}	{"news","q\\"uote","deals"}	\N`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if !used.Preferences || !used.Topics || used.PushTokens {
		t.Fatalf("sections %+v", used)
	}
}
