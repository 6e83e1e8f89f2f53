package render

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// Formatter classes of logging.conf.
const (
	JSONFormatterClass    = "oslo_log.formatters.JSONFormatter"
	ContextFormatterClass = "oslo_log.formatters.ContextFormatter"
)

var logLevels = map[v1alpha1.LogLevel]bool{
	"DEBUG": true, "INFO": true, "WARNING": true, "ERROR": true, "CRITICAL": true,
}

// resolvedLogging is spec.logging with every default applied.
type resolvedLogging struct {
	format    v1alpha1.LogFormat
	level     v1alpha1.LogLevel
	debug     bool
	perLogger map[string]v1alpha1.LogLevel
}

func resolveLogging(s *v1alpha1.GlanceSpec) resolvedLogging {
	r := resolvedLogging{format: v1alpha1.DefaultLogFormat, level: v1alpha1.DefaultLogLevel}
	if l := s.Logging; l != nil {
		r.format = v1alpha1.LogFormat(cmp.Or(string(l.Format), string(v1alpha1.DefaultLogFormat)))
		r.level = v1alpha1.LogLevel(cmp.Or(string(l.Level), string(v1alpha1.DefaultLogLevel)))
		r.debug = ptr.Deref(l.Debug, v1alpha1.DefaultLogDebug)
		r.perLogger = l.PerLoggerLevels
	}
	return r
}

// rootLevel is the level of the root logger: debug wins over level.
func (r resolvedLogging) rootLevel() v1alpha1.LogLevel {
	if r.debug {
		return "DEBUG"
	}
	return r.level
}

// RendersLoggingConf reports whether the config carries logging.conf (and
// glance-api.conf points log_config_append at it). Without it oslo.log logs
// text at INFO, or DEBUG with [DEFAULT] debug; anything else — JSON lines,
// per-logger levels, or a root level other than INFO — needs the file.
func RendersLoggingConf(s *v1alpha1.GlanceSpec) bool {
	r := resolveLogging(s)
	return r.format == v1alpha1.LogFormatJSON || len(r.perLogger) > 0 || r.rootLevel() != "INFO" && !r.debug
}

// LoggingConf renders logging.conf for Python's logging.config.fileConfig,
// which oslo.log runs on log_config_append. Everything goes to one stdout
// handler; each perLoggerLevels entry only sets its logger's level and
// propagates to that handler (propagate = 1, no handlers of its own), so a
// line is written once however the named loggers nest.
//
// The file also sits in oslo.config's --config-dir, so it is written with the
// same INI writer: one line per key, nothing oslo.config would misread.
func LoggingConf(s *v1alpha1.GlanceSpec) (string, error) {
	r := resolveLogging(s)
	var formatter, class string
	switch r.format {
	case v1alpha1.LogFormatJSON:
		formatter, class = "json", JSONFormatterClass
	case v1alpha1.LogFormatText:
		formatter, class = "context", ContextFormatterClass
	default:
		return "", fmt.Errorf("spec.logging.format %q must be text or json", r.format)
	}
	if !logLevels[r.level] {
		return "", fmt.Errorf("spec.logging.level %q must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL", r.level)
	}

	// Logger handles name the [logger_<handle>] sections and are listed
	// comma-separated, so they are derived from the logger names rather than
	// being the names themselves.
	used := map[string]bool{"root": true}
	var handles, names []string
	for _, name := range slices.Sorted(maps.Keys(r.perLogger)) {
		switch {
		case name == "" || name == "root":
			// fileConfig would reconfigure the root logger and drop its handler.
			return "", fmt.Errorf("spec.logging.perLoggerLevels: %q names the root logger; set spec.logging.level instead", name)
		case hasSurroundingSpace(name):
			return "", fmt.Errorf("spec.logging.perLoggerLevels: logger name %q starts or ends with whitespace", name)
		case !logLevels[r.perLogger[name]]:
			return "", fmt.Errorf("spec.logging.perLoggerLevels[%s] %q must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL", name, r.perLogger[name])
		}
		h := loggerHandle(name)
		for i := 2; used[h]; i++ {
			h = loggerHandle(name) + "_" + strconv.Itoa(i)
		}
		used[h] = true
		handles = append(handles, h)
		names = append(names, name)
	}

	f := NewINI()
	f.Set("loggers", "keys", strings.Join(append([]string{"root"}, handles...), ","))
	f.Set("handlers", "keys", "stdout")
	f.Set("formatters", "keys", formatter)
	f.Set("logger_root", "level", string(r.rootLevel()))
	f.Set("logger_root", "handlers", "stdout")
	for i, h := range handles {
		section := "logger_" + h
		f.Set(section, "level", string(r.perLogger[names[i]]))
		f.Set(section, "handlers", "")
		f.Set(section, "propagate", "1")
		f.Set(section, "qualname", configParserLiteral(names[i]))
	}
	f.Set("handler_stdout", "class", "StreamHandler")
	f.Set("handler_stdout", "args", "(sys.stdout,)")
	f.Set("handler_stdout", "formatter", formatter)
	f.Set("formatter_"+formatter, "class", class)
	return f.Render()
}

// loggerHandle maps a logger name to letters, digits, '_' and '.'.
func loggerHandle(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}
