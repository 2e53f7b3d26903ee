package templates

import (
	"golang.org/x/text/language"
)

// ResolveLocale picks the locale to render from available (e.g.
// Template.AvailableLocales()) and returns it spelled exactly as it appears in
// available.
//
// The fallback chain is: the user's locale ("de-AT") → its base language
// ("de") → tenantDefault → "en". Each step is tried in the same way, in this
// order:
//
//  1. exact: an available locale that is the same BCP 47 tag (case and "_"
//     vs "-" do not matter);
//  2. base language: the bare language ("de" for "de-AT"), unless its
//     script differs (zh-TW is Traditional Chinese, bare "zh" is Simplified, so
//     zh-TW does not fall back to zh; sr-Latn does not fall back to
//     Cyrillic sr);
//  3. same language, other region: golang.org/x/text/language's matcher at
//     confidence High or better ("de-AT" → "de-DE", "pt-BR" → "pt-PT",
//     "en-AU" → "en-GB"; never across scripts).
//
// Unparseable inputs and available entries are skipped. If nothing matches,
// available[0] is returned (for Template.AvailableLocales, the template's base
// locale); if available is empty, "" is returned. The result depends only on
// the arguments, including the order of available.
func ResolveLocale(userLocale string, available []string, tenantDefault string) string {
	if len(available) == 0 {
		return ""
	}
	var tags []language.Tag
	var idx []int // idx[i] is the index in available of tags[i]
	for i, a := range available {
		if t, ok := parseLocale(a); ok {
			tags = append(tags, t)
			idx = append(idx, i)
		}
	}
	if len(tags) > 0 {
		var matcher language.Matcher // built lazily
		for _, want := range []string{userLocale, tenantDefault, FallbackLocale} {
			wt, ok := parseLocale(want)
			if !ok {
				continue
			}
			if i := indexOfTag(tags, wt); i >= 0 {
				return available[idx[i]]
			}
			if b, conf := wt.Base(); conf != language.No {
				bt, err := language.Compose(b)
				if err == nil && sameScript(wt, bt) {
					if i := indexOfTag(tags, bt); i >= 0 {
						return available[idx[i]]
					}
				}
			}
			if matcher == nil {
				matcher = language.NewMatcher(tags)
			}
			if _, i, conf := matcher.Match(wt); conf >= language.High {
				return available[idx[i]]
			}
		}
	}
	return available[0]
}

func indexOfTag(tags []language.Tag, want language.Tag) int {
	w := want.String()
	for i, t := range tags {
		if t.String() == w {
			return i
		}
	}
	return -1
}

func sameScript(a, b language.Tag) bool {
	sa, _ := a.Script()
	sb, _ := b.Script()
	return sa == sb
}
