package render

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/iniparse"
)

func TestRendersLoggingConf(t *testing.T) {
	tests := []struct {
		name    string
		logging *v1alpha1.LoggingSpec
		want    bool
	}{
		{"absent", nil, false},
		{"text INFO", &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatText, Level: "INFO"}, false},
		{"debug alone is [DEFAULT] debug", &v1alpha1.LoggingSpec{Debug: ptr.To(true)}, false},
		{"debug wins over a level", &v1alpha1.LoggingSpec{Debug: ptr.To(true), Level: "ERROR"}, false},
		{"json", &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatJSON}, true},
		{"per-logger levels", &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{"x": "DEBUG"}}, true},
		{"root level other than INFO", &v1alpha1.LoggingSpec{Level: "WARNING"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &minimalGlance().Spec
			s.Logging = tt.logging
			if got := RendersLoggingConf(s); got != tt.want {
				t.Errorf("RendersLoggingConf = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoggingConf(t *testing.T) {
	tests := []struct {
		name    string
		logging *v1alpha1.LoggingSpec
		want    map[[2]string]string
	}{
		{
			name:    "json at INFO",
			logging: &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatJSON},
			want: map[[2]string]string{
				{"loggers", "keys"}:             "root",
				{"handlers", "keys"}:            "stdout",
				{"formatters", "keys"}:          "json",
				{"logger_root", "level"}:        "INFO",
				{"logger_root", "handlers"}:     "stdout",
				{"handler_stdout", "class"}:     "StreamHandler",
				{"handler_stdout", "args"}:      "(sys.stdout,)",
				{"handler_stdout", "formatter"}: "json",
				{"formatter_json", "class"}:     "oslo_log.formatters.JSONFormatter",
			},
		},
		{
			name:    "debug makes the root DEBUG",
			logging: &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatJSON, Level: "ERROR", Debug: ptr.To(true)},
			want:    map[[2]string]string{{"logger_root", "level"}: "DEBUG"},
		},
		{
			name: "text with per-logger levels",
			logging: &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{
				"sqlalchemy": "WARNING", "odd name,%": "DEBUG", "odd_name__": "ERROR",
			}},
			want: map[[2]string]string{
				{"loggers", "keys"}:                 "root,odd_name__,odd_name___2,sqlalchemy",
				{"formatters", "keys"}:              "context",
				{"formatter_context", "class"}:      "oslo_log.formatters.ContextFormatter",
				{"logger_sqlalchemy", "level"}:      "WARNING",
				{"logger_sqlalchemy", "qualname"}:   "sqlalchemy",
				{"logger_sqlalchemy", "propagate"}:  "1",
				{"logger_sqlalchemy", "handlers"}:   "",
				{"logger_odd_name__", "qualname"}:   "odd name,%%",
				{"logger_odd_name__", "level"}:      "DEBUG",
				{"logger_odd_name___2", "qualname"}: "odd_name__",
				{"logger_odd_name___2", "level"}:    "ERROR",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &minimalGlance().Spec
			s.Logging = tt.logging
			text, err := LoggingConf(s)
			if err != nil {
				t.Fatal(err)
			}
			// Both readers of the file must agree on it.
			p := mustParseINI(t, text, iniparse.ConfigParser)
			if o := mustParseINI(t, text, iniparse.Oslo); len(o) != len(p) {
				t.Errorf("oslo.config reads %d sections, configparser %d", len(o), len(p))
			}
			for sk, want := range tt.want {
				if got, ok := p[sk[0]][sk[1]]; !ok || got != want {
					t.Errorf("[%s] %s = %q (present %v), want %q", sk[0], sk[1], got, ok, want)
				}
			}
			// Every listed logger has its section.
			for _, h := range strings.Split(p["loggers"]["keys"], ",") {
				if _, ok := p["logger_"+h]; !ok {
					t.Errorf("logger %s has no [logger_%s]", h, h)
				}
			}
		})
	}
}

func TestLoggingConfErrors(t *testing.T) {
	tests := []struct {
		name    string
		logging *v1alpha1.LoggingSpec
	}{
		{"unknown format", &v1alpha1.LoggingSpec{Format: "xml"}},
		{"unknown level", &v1alpha1.LoggingSpec{Format: v1alpha1.LogFormatJSON, Level: "TRACE"}},
		{"unknown per-logger level", &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{"x": "LOUD"}}},
		{"root logger by name", &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{"root": "DEBUG"}}},
		{"empty logger name", &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{"": "DEBUG"}}},
		{"padded logger name", &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{" x": "DEBUG"}}},
		{"line break in logger name", &v1alpha1.LoggingSpec{PerLoggerLevels: map[string]v1alpha1.LogLevel{"x\n[y]": "DEBUG"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &minimalGlance().Spec
			s.Logging = tt.logging
			if _, err := LoggingConf(s); err == nil {
				t.Error("no error")
			}
		})
	}
}
