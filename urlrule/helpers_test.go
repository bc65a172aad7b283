package urlrule

import "github.com/drover-crawl/drover/internal/expect"

// The assertion style of urlrule's tests, shared with fetch's.
var (
	equal = expect.Equal
	must  = expect.Must
	check = expect.Check
)
