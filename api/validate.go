package api

import (
	"net/mail"
	"regexp"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/language"
)

var (
	e164       = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	templateID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$`)
)

// validID checks a tenant-chosen identifier (user_id, idempotency key): 1–255
// printable characters with no slash, so it is safe in a URL path segment.
func validID(field, v string) *Error {
	if v == "" {
		return badField(field, "missing_field", "%s is required", field)
	}
	if len(v) > 255 || !utf8.ValidString(v) {
		return badField(field, "invalid_field", "%s must be 1 to 255 bytes of UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) || r == '/' || unicode.IsSpace(r) {
			return badField(field, "invalid_field", "%s must not contain whitespace, control characters or '/'", field)
		}
	}
	return nil
}

func validTemplateID(v string) *Error {
	if v == "" {
		return badField("template_id", "missing_field", "template_id is required")
	}
	if !templateID.MatchString(v) {
		return badField("template_id", "invalid_field", "template_id must be 1 to 128 characters of letters, digits, '_', '.' or '-'")
	}
	return nil
}

func validEmail(v string) *Error {
	addr, err := mail.ParseAddress(v)
	if err != nil || addr.Address != v || len(v) > 254 {
		return badField("email", "invalid_field", "email must be a plain address such as ada@example.com")
	}
	return nil
}

func validPhone(v string) *Error {
	if !e164.MatchString(v) {
		return badField("phone", "invalid_field", "phone must be in E.164 form, such as +14155550100")
	}
	return nil
}

func validLocale(v string) *Error {
	if _, err := language.Parse(v); err != nil || len(v) > 35 {
		return badField("locale", "invalid_field", "locale must be a BCP 47 language tag such as en-US")
	}
	return nil
}

func validTimezone(v string) *Error {
	if v == "" || v == "Local" {
		return badField("timezone", "invalid_field", "timezone must be an IANA time zone such as Europe/Berlin")
	}
	if _, err := time.LoadLocation(v); err != nil {
		return badField("timezone", "invalid_field", "timezone must be an IANA time zone such as Europe/Berlin")
	}
	return nil
}
