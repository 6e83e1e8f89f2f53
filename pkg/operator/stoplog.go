package operator

import (
	"context"
	"errors"
	"slices"

	"github.com/go-logr/logr"
)

// Messages controller-runtime's manager logs when its leader election ends
// during the stop sequence.
const (
	stopSequenceErrorMessage = "error received after stop sequence was engaged"
	leaderElectionLost       = "leader election lost"
)

// withoutStopErrors returns log, for the manager, with the errors a clean
// stop itself produces logged at info:
//
//   - "leader election lost": the leader elector calls OnStoppedLeading
//     whenever it ends, and controller-runtime reports that as this error
//     after its stop sequence began, on the leader (which has just released
//     the lease, LeaderElectionReleaseOnCancel) and on a standby alike
//     (controller-runtime#3535). A lease really lost while running ends
//     Start with that error instead, which the caller reports.
//   - an error that is context.Canceled: a lease renewal or an API request
//     cut short. Only the stop cancels the manager's contexts.
func withoutStopErrors(log logr.Logger) logr.Logger {
	if log.GetSink() == nil {
		return log
	}
	return log.WithSink(stopErrorSink{log.GetSink()})
}

// stopErrorSink passes everything to the LogSink it embeds but the errors
// withoutStopErrors names.
type stopErrorSink struct {
	logr.LogSink
}

func (s stopErrorSink) Error(err error, msg string, keysAndValues ...any) {
	switch {
	case msg == stopSequenceErrorMessage && err != nil && err.Error() == leaderElectionLost:
		msg = "leader election ended with the stop"
	case errors.Is(err, context.Canceled):
	default:
		s.LogSink.Error(err, msg, keysAndValues...)
		return
	}
	if s.Enabled(0) {
		s.Info(0, msg, slices.Concat(keysAndValues, []any{"reason", err.Error()})...)
	}
}

func (s stopErrorSink) WithValues(keysAndValues ...any) logr.LogSink {
	return stopErrorSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s stopErrorSink) WithName(name string) logr.LogSink {
	return stopErrorSink{s.LogSink.WithName(name)}
}
