package templates

import (
	"slices"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

func TestResolveLocale(t *testing.T) {
	tests := []struct {
		name          string
		user          string
		available     []string
		tenantDefault string
		want          string
	}{
		{"exact user locale", "de-AT", []string{"en", "de", "de-AT"}, "fr", "de-AT"},
		{"exact, case and underscore insensitive", "de_at", []string{"en", "de-AT"}, "", "de-AT"},
		{"exact, spelled as available", "pt-br", []string{"en", "PT-BR"}, "", "PT-BR"},
		{"base language", "de-AT", []string{"en", "fr", "de"}, "fr", "de"},
		{"base language before other region", "de-AT", []string{"de-DE", "de"}, "", "de"},
		{"same language other region", "de-AT", []string{"en", "de-DE"}, "fr", "de-DE"},
		{"pt-BR to pt-PT", "pt-BR", []string{"en", "pt-PT"}, "", "pt-PT"},
		{"tenant default", "ja-JP", []string{"en", "fr", "de"}, "fr", "fr"},
		{"tenant default by base language", "ja", []string{"en", "fr"}, "fr-CA", "fr"},
		{"en when tenant default unavailable", "ja", []string{"de", "en", "fr"}, "it", "en"},
		{"en when no tenant default", "ja", []string{"de", "en"}, "", "en"},
		{"en-US matches en", "ja", []string{"de", "en-US"}, "", "en-US"},
		{"first available when nothing matches", "ja", []string{"de", "fr"}, "it", "de"},
		{"invalid user locale skips to tenant default", "not a locale!", []string{"en", "fr"}, "fr", "fr"},
		{"empty user locale", "", []string{"en", "fr"}, "fr", "fr"},
		{"zh-TW does not fall back to simplified zh", "zh-TW", []string{"zh", "en"}, "", "en"},
		{"zh-TW to zh-Hant", "zh-TW", []string{"zh-Hans", "zh-Hant", "en"}, "", "zh-Hant"},
		{"sr-Latn does not fall back to cyrillic sr", "sr-Latn", []string{"sr", "en"}, "", "en"},
		{"invalid available entries skipped", "de", []string{"??", "de"}, "", "de"},
		{"nothing available", "de", nil, "en", ""},
	}
	for _, tc := range tests {
		if got := ResolveLocale(tc.user, tc.available, tc.tenantDefault); got != tc.want {
			t.Errorf("%s: ResolveLocale(%q, %v, %q) = %q, want %q", tc.name, tc.user, tc.available, tc.tenantDefault, got, tc.want)
		}
	}
}

func TestTemplateLocalesAndChannels(t *testing.T) {
	tpl := Template{DefaultLocale: "de", SMS: &SMSContent{Text: "x"}, Email: &EmailContent{Subject: "s", Text: "t"},
		Locales: map[string]Variant{"fr": {}, "en": {}, "es": {}}}
	if got, want := tpl.AvailableLocales(), []string{"de", "en", "es", "fr"}; !equalStrings(got, want) {
		t.Errorf("AvailableLocales = %v, want %v", got, want)
	}
	if got, want := tpl.Channels(), []herald.Channel{"email", "sms"}; !slices.Equal(got, want) {
		t.Errorf("Channels = %v, want %v", got, want)
	}
	if got := (Template{}).BaseLocale(); got != "en" {
		t.Errorf("BaseLocale of empty = %q", got)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
