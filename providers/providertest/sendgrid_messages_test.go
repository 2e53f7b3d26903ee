package providertest_test

import (
	"reflect"
	"testing"

	"github.com/herald-notify/herald/providers/providertest"
)

// TestSendGridMailMessages: one message per personalization, its subject (or
// the mail's), the mail's headers overlaid with its own, and its substitutions
// applied to subject, content and reply-to.
func TestSendGridMailMessages(t *testing.T) {
	body := `{"personalizations":[
		{"to":[{"email":"a@example.com"}],"substitutions":{"-n-":"Ada","-h-":"&lt;Ada&gt;"},"headers":{"X-A":"1"},"custom_args":{"notification_id":"n1"}},
		{"to":[{"email":"b@example.com"},{"email":"c@example.com"}],"subject":"Own -n-","substitutions":{"-n-":"Bob"}},
		{"to":[{"email":"d@example.com"}]}],
		"from":{"email":"shop@example.com"},"reply_to":{"email":"help+-n-@example.com"},"subject":"Hi -n-",
		"content":[{"type":"text/plain","value":"Hello -n-"},{"type":"text/html","value":"<p>Hello -h-</p>"}],
		"headers":{"X-A":"0","X-B":"2"}}`
	m, err := providertest.DecodeMail(providertest.Request{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	got := m.Messages()
	want := []providertest.SendGridMessage{
		{To: []string{"a@example.com"}, Subject: "Hi Ada", Text: "Hello Ada", HTML: "<p>Hello &lt;Ada&gt;</p>", ReplyTo: "help+Ada@example.com",
			Headers: map[string]string{"X-A": "1", "X-B": "2"}, CustomArgs: map[string]string{"notification_id": "n1"}},
		{To: []string{"b@example.com", "c@example.com"}, Subject: "Own Bob", Text: "Hello Bob", HTML: "<p>Hello -h-</p>", ReplyTo: "help+Bob@example.com",
			Headers: map[string]string{"X-A": "0", "X-B": "2"}},
		{To: []string{"d@example.com"}, Subject: "Hi -n-", Text: "Hello -n-", HTML: "<p>Hello -h-</p>", ReplyTo: "help+-n-@example.com",
			Headers: map[string]string{"X-A": "0", "X-B": "2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages\n%+v\nwant\n%+v", got, want)
	}
}
