package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// errorReason is the most useful message of an activity failure: the retry
// budget running out says so, with the last failure's message.
func errorReason(err error) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if cause := errors.Unwrap(timeout); cause != nil {
			return "gave up after the retry budget: " + errorReason(cause)
		}
		return "gave up after the retry budget: " + timeout.Message()
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}
