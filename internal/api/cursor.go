package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/packrun/packrun/host"
)

// Paging: every paged route takes the query parameter cursor and answers
// next_cursor, an opaque string to pass back as cursor for the next page
// (absent when the page is the last one; /v1/events and /v1/messages,
// which are polled for new items, always give it on events). The old
// names, after (/v1/events, /v1/messages) and the answers next_after and
// next, stay as deprecated aliases.

// cursorParam reads the cursor of a page: ?cursor=, or the deprecated
// alias when the route had one ("" for none). Both given is a 400.
func cursorParam(q url.Values, alias string) (v, name string, err error) {
	v, name = q.Get("cursor"), "cursor"
	if alias != "" && q.Has(alias) {
		if q.Has("cursor") {
			return "", "", refuse(http.StatusBadRequest, CodeInvalid, alias, alias+": a deprecated alias of cursor; give only cursor")
		}
		v, name = q.Get(alias), alias
	}
	return v, name, nil
}

// seqCursor reads a cursor that is a seq (events, messages, attempts):
// an integer from lo.
func seqCursor(v, name string, lo int64, what string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > 1<<62 {
		return 0, refuse(http.StatusBadRequest, CodeInvalid, name, name+": must be the next_cursor of a page ("+what+")")
	}
	return n, nil
}

// taskCursor reads the cursor of /v1/tasks: the id of the last task of a
// page.
func taskCursor(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if host.CheckID("list tasks", "cursor", v) != nil {
		return "", badTaskCursor()
	}
	return v, nil
}

func badTaskCursor() error {
	return refuse(http.StatusBadRequest, CodeInvalid, "cursor", "cursor: must be the next_cursor of a page of /v1/tasks (a task id of yours)")
}
