package smtp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"

	mail "github.com/wneessen/go-mail"
	mailsmtp "github.com/wneessen/go-mail/smtp"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

var enhancedRe = regexp.MustCompile(`\b([245])\.(\d{1,3})\.(\d{1,3})\b`)

// classify turns what go-mail returned into a *providers.Error. ioErr is the first
// network error seen on the connection (nil if none).
func classify(ctx context.Context, ioErr, err error) *providers.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The context ended: its deadline or cancellation closed the connection,
		// whatever error that caused inside go-mail.
		pe := providers.TransportError(Name, ctxErr)
		pe.Reason = fmt.Sprintf("%s (%v)", ctxErr, err)
		return pe
	}
	var se *mail.SendError
	if errors.As(err, &se) {
		return classifySend(se, ioErr, err)
	}
	return classifyConnect(ioErr, err)
}

// classifySend handles failures after the session was set up (MAIL, RCPT, DATA).
func classifySend(se *mail.SendError, ioErr, err error) *providers.Error {
	if code := se.ErrorCode(); code >= 400 && code < 600 {
		enh := se.EnhancedStatusCode()
		if enh == "" {
			enh = enhancedRe.FindString(err.Error())
		}
		return replyError(code, enh, stageOf(se.Reason), err.Error(), err)
	}
	if ioErr != nil {
		pe := providers.TransportError(Name, ioErr)
		pe.Reason = fmt.Sprintf("%s: %v", se.Reason, ioErr)
		pe.Err = err
		return pe
	}
	switch se.Reason {
	case mail.ErrGetSender, mail.ErrGetRcpts:
		return &providers.Error{Provider: Name, Code: "bad_request", Reason: err.Error(), Permanent: true, Err: err}
	case mail.ErrNoUnencoded:
		return &providers.Error{Provider: Name, Code: "config", Reason: err.Error(), Permanent: true, Err: err}
	}
	// No reply code and no network error: something local went wrong mid-session;
	// the relay may be fine. Retryable.
	return &providers.Error{Provider: Name, Code: "connection", Reason: err.Error(), Err: err}
}

// classifyConnect handles failures while connecting: dial, greeting, EHLO,
// STARTTLS, AUTH.
func classifyConnect(ioErr, err error) *providers.Error {
	if egress.IsRefused(err) {
		// Refused before any packet was sent: permanent, naming only the host.
		return providers.TransportError(Name, err)
	}
	var pErr textproto.ProtocolError
	if errors.As(err, &pErr) {
		// Something that is not an SMTP server answered (an SSH or database
		// port, say). What it said is not quoted: the tenant chose the port.
		return &providers.Error{Provider: Name, Code: "protocol", Permanent: true, Err: err,
			Reason: "the relay did not answer as an SMTP server (check settings.host, settings.port and settings.tls)"}
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		stage := "connect"
		if strings.Contains(err.Error(), "SMTP AUTH failed") {
			stage = "auth"
		}
		return replyError(te.Code, enhancedRe.FindString(te.Msg), stage, err.Error(), err)
	}
	if isConfigError(err) {
		return &providers.Error{Provider: Name, Code: "config", Reason: err.Error(), Permanent: true, Err: err}
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid):
		return &providers.Error{Provider: Name, Code: "tls", Reason: "relay certificate: " + err.Error(), Permanent: true, Err: err}
	case errors.As(err, &recErr):
		return &providers.Error{Provider: Name, Code: "tls", Reason: "relay does not speak TLS on this port (check the tls setting): " + err.Error(), Permanent: true, Err: err}
	}
	if ioErr != nil {
		pe := providers.TransportError(Name, ioErr)
		pe.Err = err
		return pe
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return providers.TransportError(Name, err)
	}
	return &providers.Error{Provider: Name, Code: "connection", Reason: err.Error(), Err: err}
}

// isConfigError reports errors that only a configuration change can fix.
func isConfigError(err error) bool {
	for _, target := range []error{
		mail.ErrNoSupportedAuthDiscovered, mail.ErrPlainAuthNotSupported, mail.ErrLoginAuthNotSupported,
		mail.ErrSCRAMSHA256AuthNotSupported, mail.ErrCramMD5AuthNotSupported,
		mailsmtp.ErrUnencrypted, mailsmtp.ErrWrongHostname,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "does not support STARTTLS") || strings.Contains(msg, "server does not support SMTP AUTH") ||
		strings.Contains(msg, "doesn't support AUTH")
}

// replyError classifies an SMTP reply code.
func replyError(code int, enhanced, stage, reason string, err error) *providers.Error {
	pe := &providers.Error{Provider: Name, Code: "smtp_" + strconv.Itoa(code), Reason: reason, Err: err}
	if enhanced != "" && !strings.Contains(reason, enhanced) {
		pe.Reason = enhanced + " " + reason
	}
	switch {
	case code >= 400 && code < 500:
		// Transient by definition (RFC 5321 4.2.1): 421 service unavailable,
		// 450/451/452, 454 temporary authentication failure.
		pe.Permanent = false
	case stage == "auth" || code == 530 || code == 534 || code == 535 || code == 538:
		pe.Code, pe.Permanent = "auth", true
		pe.Reason = "relay rejected the credentials: " + pe.Reason
	case stage == "rcpt" && (code == 553 || ((code == 550 || code == 551) && strings.HasPrefix(enhanced, "5.1."))):
		pe.Code, pe.Permanent = "invalid_address", true
	default:
		// 5xx: permanent (550 mailbox unavailable, 552 size, 554 rejected, 5xx
		// syntax errors).
		pe.Permanent = code >= 500
	}
	return pe
}

func stageOf(r mail.SendErrReason) string {
	switch r {
	case mail.ErrSMTPMailFrom:
		return "mail"
	case mail.ErrSMTPRcptTo:
		return "rcpt"
	case mail.ErrSMTPData, mail.ErrWriteContent, mail.ErrSMTPDataClose:
		return "data"
	}
	return "other"
}
