package templates

import (
	"strings"
	"testing"
)

func TestSMSSegments(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		encoding string
		segments int
	}{
		{"empty", "", EncodingGSM7, 0},
		{"short ascii", "Hello", EncodingGSM7, 1},
		{"160 gsm chars", strings.Repeat("a", 160), EncodingGSM7, 1},
		{"161 gsm chars", strings.Repeat("a", 161), EncodingGSM7, 2},
		{"306 gsm chars", strings.Repeat("a", 306), EncodingGSM7, 2},
		{"307 gsm chars", strings.Repeat("a", 307), EncodingGSM7, 3},
		{"gsm specials are one septet", strings.Repeat("é", 160), EncodingGSM7, 1},
		{"extension chars count double: 80 euro = 160 septets", strings.Repeat("€", 80), EncodingGSM7, 1},
		{"81 euro = 162 septets", strings.Repeat("€", 81), EncodingGSM7, 2},
		{"159 + one extension char", strings.Repeat("a", 159) + "{", EncodingGSM7, 2},
		// 152 septets then a 2-septet char: the escape pair moves to segment 2.
		{"escape pair not split", strings.Repeat("a", 152) + "^" + strings.Repeat("a", 152), EncodingGSM7, 3},
		{"one ucs-2 char switches encoding", "Hello ç", EncodingUCS2, 1},
		{"70 ucs-2", strings.Repeat("ж", 70), EncodingUCS2, 1},
		{"71 ucs-2", strings.Repeat("ж", 71), EncodingUCS2, 2},
		{"134 ucs-2", strings.Repeat("ж", 134), EncodingUCS2, 2},
		{"135 ucs-2", strings.Repeat("ж", 135), EncodingUCS2, 3},
		{"emoji take two code units", strings.Repeat("😀", 35), EncodingUCS2, 1},
		{"36 emoji = 72 units", strings.Repeat("😀", 36), EncodingUCS2, 2},
		// 66 units then a surrogate pair: the pair moves to segment 2.
		{"surrogate pair not split", strings.Repeat("ж", 66) + "😀" + strings.Repeat("ж", 66), EncodingUCS2, 3},
		{"newline and cr are gsm", "a\nb\rc", EncodingGSM7, 1},
		{"backtick is not gsm", "`", EncodingUCS2, 1},
	}
	for _, tc := range tests {
		enc, n := SMSSegments(tc.text)
		if enc != tc.encoding || n != tc.segments {
			t.Errorf("%s: SMSSegments = (%s, %d), want (%s, %d)", tc.name, enc, n, tc.encoding, tc.segments)
		}
	}
}
