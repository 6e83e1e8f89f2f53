// Package logging builds the structured logger of both binaries.
package logging

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
)

// New logs through log/slog in text or json. Levels map logr verbosity V(n)
// to slog level -n, so debug (-4) shows V(1) to V(4) and never
// controller-runtime's V(5) response dumps, whose messages can quote field
// values.
func New(w io.Writer, format, level string) (logr.Logger, error) {
	var lvl slog.Level
	switch level {
	case "error":
		lvl = slog.LevelError
	case "info":
		lvl = slog.LevelInfo
	case "debug":
		lvl = slog.LevelDebug
	default:
		return logr.Logger{}, fmt.Errorf("--log-level %q: want error, info or debug", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return logr.FromSlogHandler(slog.NewTextHandler(w, opts)), nil
	case "json":
		return logr.FromSlogHandler(slog.NewJSONHandler(w, opts)), nil
	default:
		return logr.Logger{}, fmt.Errorf("--log-format %q: want text or json", format)
	}
}
