package contract

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/herald"
)

// acrossTemporal is err as the other side of an activity or update sees it:
// encoded to a failure and decoded again, then wrapped.
func acrossTemporal(err error) error {
	fc := temporal.GetDefaultFailureConverter()
	return fmt.Errorf("activity failed: %w", fc.FailureToError(fc.ErrorToFailure(err)))
}

func TestErrorClassesKeepTypeAndRetryability(t *testing.T) {
	cause := errors.New("cause")
	for _, tc := range []struct {
		class     ErrorClass
		retryable bool
		permanent bool
	}{
		{UnknownUser, false, true},
		{ProviderPermanent, false, true},
		{NoDevice, false, true},
		{RenderFailed, false, true},
		{ContentTooLarge, false, true},
		{NoProvider, false, true},
		{BadPayload, false, true},
		{BadWorkflowID, false, true},
		{NoWebhookSender, false, true},
		{EndpointDisabled, false, true},
		{NotificationExpired, false, true},
		{ProviderUnavailable, true, false},
		{AlreadySent, true, false},
		{CampaignFinal, true, false},
	} {
		err := acrossTemporal(tc.class.New("it failed", cause))
		if !tc.class.Is(err) || ErrorType(err) != string(tc.class) {
			t.Errorf("%s: type %q", tc.class, ErrorType(err))
		}
		if IsNonRetryable(err) == tc.retryable {
			t.Errorf("%s: non-retryable = %v, want %v", tc.class, IsNonRetryable(err), !tc.retryable)
		}
		if IsPermanent(err) != tc.permanent {
			t.Errorf("%s: permanent = %v", tc.class, IsPermanent(err))
		}
		if ErrorMessage(err) != "it failed" {
			t.Errorf("%s: message %q", tc.class, ErrorMessage(err))
		}
	}
}

// A class the retry policy stops is permanent even when the error itself was
// not marked non-retryable.
func TestIsPermanentByTypeAlone(t *testing.T) {
	for _, typ := range []string{herald.ErrTypeProviderPermanent, herald.ErrTypeNoDevice, herald.ErrTypeRenderFailed, herald.ErrTypeContentTooLarge} {
		if !IsPermanent(temporal.NewApplicationError("x", typ)) {
			t.Errorf("%s is not permanent", typ)
		}
	}
	if IsPermanent(temporal.NewApplicationError("x", herald.ErrTypeUnknownUser)) || IsPermanent(errors.New("plain")) {
		t.Error("a retryable error is permanent")
	}
}

func TestPlainErrors(t *testing.T) {
	err := errors.New("plain")
	if IsApplicationError(err) || ErrorType(err) != "" || IsNonRetryable(err) || ErrorMessage(err) != "plain" || FailureReason(err) != "" {
		t.Error("a plain error reads as an application error")
	}
	if FailureReason(NoProvider.New("none", nil)) != herald.ReasonNoProvider {
		t.Error("NoProvider records no reason")
	}
}

func TestNewRetryAfterCarriesTheDelay(t *testing.T) {
	var appErr *temporal.ApplicationError
	if !errors.As(ProviderUnavailable.NewRetryAfter("slow down", nil, 3*time.Second), &appErr) || appErr.NextRetryDelay() != 3*time.Second || appErr.NonRetryable() {
		t.Fatalf("got %v", appErr)
	}
}
