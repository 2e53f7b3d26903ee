package templates

import "unicode/utf16"

// SMS encodings reported by SMSSegments.
const (
	EncodingGSM7 = "GSM-7"
	EncodingUCS2 = "UCS-2"
)

// gsm7Basic is the GSM 03.38 default alphabet (one septet each).
const gsm7Basic = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
	"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"

// gsm7Extension is the GSM 03.38 extension table: each costs two septets
// (ESC + the character).
const gsm7Extension = "\f^{}\\[~]|€"

var gsm7Cost = func() map[rune]int {
	m := make(map[rune]int, 140)
	for _, r := range gsm7Basic {
		m[r] = 1
	}
	for _, r := range gsm7Extension {
		m[r] = 2
	}
	return m
}()

// SMSSegments reports how text is encoded and how many SMS segments it
// takes.
//
// Text made only of GSM 03.38 characters is GSM-7: one segment holds 160
// septets, a concatenated message 153 septets per segment (7 go to the UDH).
// Extension-table characters (^ { } \ [ ~ ] | € and form feed) cost two
// septets, and an escape pair is never split across segments.
//
// Anything else is UCS-2: 70 UTF-16 code units in one segment, 67 per segment
// when concatenated; characters outside the BMP (most emoji) take two code
// units and a surrogate pair is never split across segments.
//
// Empty text is GSM-7 with 0 segments.
func SMSSegments(text string) (encoding string, segments int) {
	gsm := true
	for _, r := range text {
		if gsm7Cost[r] == 0 {
			gsm = false
			break
		}
	}
	var costs []int
	single, multi := 160, 153
	encoding = EncodingGSM7
	if gsm {
		for _, r := range text {
			costs = append(costs, gsm7Cost[r])
		}
	} else {
		encoding = EncodingUCS2
		single, multi = 70, 67
		for _, r := range text {
			costs = append(costs, utf16.RuneLen(r))
		}
	}
	total := 0
	for _, c := range costs {
		total += c
	}
	switch {
	case total == 0:
		return encoding, 0
	case total <= single:
		return encoding, 1
	}
	// Fill segments greedily without splitting a character's units.
	segments, used := 1, 0
	for _, c := range costs {
		if used+c > multi {
			segments++
			used = 0
		}
		used += c
	}
	return encoding, segments
}
