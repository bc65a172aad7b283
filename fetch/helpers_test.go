package fetch

import "github.com/drover-crawl/drover/internal/expect"

// The assertion style of fetch's tests, shared with urlrule's.
var (
	equal = expect.Equal
	must  = expect.Must
	check = expect.Check
)
