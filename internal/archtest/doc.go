// Package archtest holds no code, only tests of the code's layout: which
// packages a process links, how long a function may grow, and whether the
// documentation holds together (a short README that links every page of
// docs/, relative links that resolve, no citation of a file the
// repository lacks). They keep the rules that a review would otherwise
// have to remember.
package archtest
