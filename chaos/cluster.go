package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RabbitCluster is a RabbitMQ cluster of the suite's own: private nodes
// (RabbitNode), each with its own ports, data directory and node name,
// sharing the machine's Erlang cookie (the rabbitmq user's), joined with
// `rabbitmqctl join_cluster` to the first.
type RabbitCluster struct {
	Nodes []*RabbitNode
}

// StartRabbitCluster starts n private nodes, one after the other (a node
// joins a running one), and clusters them. The supervisors' messages go to
// out.
func StartRabbitCluster(ctx context.Context, n int, out io.Writer) (*RabbitCluster, error) {
	c := &RabbitCluster{}
	for i := range n {
		node, err := StartRabbitNode(ctx, "", out)
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("cluster node %d: %w", i+1, err)
		}
		c.Nodes = append(c.Nodes, node)
		if i == 0 {
			continue
		}
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", c.Nodes[0].Name}, {"start_app"}} {
			if err := node.Ctl(ctx, args...); err != nil {
				c.Stop()
				return nil, fmt.Errorf("cluster node %d joining %s: %w", i+1, c.Nodes[0].Name, err)
			}
		}
		if err := node.WaitUp(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// URL is the cluster's AMQP_URL: every node's URL, separated by commas.
func (c *RabbitCluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL
	}
	return strings.Join(urls, ",")
}

// Leaders counts the quorum queues whose names start with prefix by the
// node that leads them, as a node that is up says.
func (c *RabbitCluster) Leaders(ctx context.Context, prefix string) (map[string]int, error) {
	var errs []error
	for _, n := range c.Nodes {
		if n.beamPID() == 0 {
			continue
		}
		out, err := n.CtlOutput(ctx, "list_queues", "-s", "name", "leader")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		by := map[string]int{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && strings.HasPrefix(f[0], prefix) {
				by[f[1]]++
			}
		}
		return by, nil
	}
	return nil, fmt.Errorf("no node of the cluster answered: %w", errors.Join(errs...))
}

// Connections counts the cluster's client connections by the node they
// are on, as a node that is up says.
func (c *RabbitCluster) Connections(ctx context.Context) (map[string]int, error) {
	var errs []error
	for _, n := range c.Nodes {
		if n.beamPID() == 0 {
			continue
		}
		// The port a connection reached is its node's AMQP port.
		out, err := n.CtlOutput(ctx, "list_connections", "-s", "port")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		by, err := c.byNode(n.Name, out)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return by, nil
	}
	return nil, fmt.Errorf("no node of the cluster answered: %w", errors.Join(errs...))
}

// byNode counts the connections of a list_connections' output (from the
// node named from): each line a port, each port a node's AMQP port. A
// node that cannot reach another within its timeout (a partition) prints
// the RPC's error term among the ports: that answer is an error.
func (c *RabbitCluster) byNode(from, out string) (map[string]int, error) {
	by := map[string]int{}
	for _, port := range strings.Fields(out) {
		if _, err := strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("%s: list_connections answered %.200q", from, out)
		}
		name := "port " + port
		for _, o := range c.Nodes {
			if strings.HasSuffix(o.URL, ":"+port+"/") {
				name = o.Name
			}
		}
		by[name]++
	}
	return by, nil
}

// Node returns the node named name, or nil.
func (c *RabbitCluster) Node(name string) *RabbitNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Lose takes a node away for good, as a machine whose disk died: it is no
// longer supervised, its Erlang VM is SIGKILLed and its data directory
// deleted. The others keep it as a member, down.
func (n *RabbitNode) Lose() error {
	n.sup.Stop()
	if pid := n.beamPID(); pid != 0 {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(n.dir, "mnesia"))
}

// Stop stops every node, at once.
func (c *RabbitCluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Stop()
		}()
	}
	wg.Wait()
}

// partitionCookie is the cookie a partitioned node expects from, and
// offers to, the other nodes: none of them has it.
const partitionCookie = "drover-partitioned"

// Partition cuts n off from the other nodes of the cluster, in both
// directions, while every node and its AMQP port stay up: n's Erlang
// distribution takes a cookie for them that they do not have, and drops
// its connections to them, so that each handshake between n and another
// node fails until Heal. (No packet filter is needed, nor allowed here.)
func (c *RabbitCluster) Partition(ctx context.Context, n *RabbitNode) error {
	return n.Ctl(ctx, "eval", fmt.Sprintf("[begin erlang:set_cookie(N, '%s'), erlang:disconnect_node(N) end || N <- %s], ok.",
		partitionCookie, c.peersOf(n)))
}

// Heal ends Partition: n takes its own cookie for the others again, and
// they meet at the next connection attempt.
func (c *RabbitCluster) Heal(ctx context.Context, n *RabbitNode) error {
	return n.Ctl(ctx, "eval", fmt.Sprintf("[begin erlang:set_cookie(N, erlang:get_cookie()), net_adm:ping(N) end || N <- %s], ok.", c.peersOf(n)))
}

// peersOf is the Erlang list of the other nodes' names.
func (c *RabbitCluster) peersOf(n *RabbitNode) string {
	var names []string
	for _, o := range c.Nodes {
		if o != n {
			names = append(names, "'"+o.Name+"'")
		}
	}
	return "[" + strings.Join(names, ",") + "]"
}

// Running lists the cluster's running nodes as node names, as n sees
// them.
func (n *RabbitNode) Running(ctx context.Context) ([]string, error) {
	out, err := n.CtlOutput(ctx, "eval", "rabbit_nodes:all_running().")
	if err != nil {
		return nil, err
	}
	return strings.FieldsFunc(out, func(r rune) bool { return strings.ContainsRune("[]', \n", r) }), nil
}

// Replace stands a new, empty node in for lost (a node Lose took away), as
// an operator replaces a machine whose disk died: the cluster forgets
// lost, the new node joins it, and every quorum queue grows a member on
// it (`rabbitmq-queues grow`), so that each has three again.
func (c *RabbitCluster) Replace(ctx context.Context, lost *RabbitNode, out io.Writer) (*RabbitNode, error) {
	i := slices.Index(c.Nodes, lost)
	if i < 0 {
		return nil, fmt.Errorf("%s is no node of the cluster", lost.Name)
	}
	var live *RabbitNode
	for _, n := range c.Nodes {
		if n != lost && n.beamPID() != 0 {
			live = n
			break
		}
	}
	if live == nil {
		return nil, errors.New("no node of the cluster is up")
	}
	if err := live.Ctl(ctx, "forget_cluster_node", lost.Name); err != nil {
		return nil, err
	}
	fresh, err := StartRabbitNode(ctx, "", out)
	if err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"stop_app"}, {"join_cluster", live.Name}, {"start_app"}} {
		if err := fresh.Ctl(ctx, args...); err != nil {
			fresh.Stop()
			return nil, fmt.Errorf("%s joining %s: %w", fresh.Name, live.Name, err)
		}
	}
	if err := fresh.WaitUp(ctx); err != nil {
		fresh.Stop()
		return nil, err
	}
	gctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(gctx, "rabbitmq-queues", "-q", "-n", live.Name, "grow", fresh.Name, "all").CombinedOutput(); err != nil {
		fresh.Stop()
		return nil, fmt.Errorf("rabbitmq-queues grow %s all: %w: %s", fresh.Name, err, b)
	}
	lost.Stop() // its directory, if its own
	c.Nodes[i] = fresh
	return fresh, nil
}

// QueueStates describes the quorum queues whose names start with prefix
// and hold anything, as their leaders' state machines hold them
// (rabbit_fifo, RabbitMQ 3.10 and later), as a node that is up says: for
// each, its messages ready, checked out to consumers, and dead-lettered
// but not yet handed over (at-least-once), then its consumers' statuses
// and its waiting consumers' (single active consumer). It is what AMQP's
// counts leave out (a passive declare says only the ready messages), for
// a test to log.
func (c *RabbitCluster) QueueStates(ctx context.Context, prefix string) (string, error) {
	expr := fmt.Sprintf(`P = <<"%s">>, `+
		`[R || Q <- rabbit_amqqueue:list(), amqqueue:get_type(Q) == rabbit_quorum_queue, `+
		`binary:longest_common_prefix([element(4, amqqueue:get_name(Q)), P]) == byte_size(P), `+
		`R <- [catch ra:leader_query(amqqueue:get_pid(Q), fun(S) -> O = rabbit_fifo:overview(S), `+
		`{element(4, amqqueue:get_name(Q)), ready, maps:get(num_ready_messages, O), out, maps:get(num_checked_out, O), `+
		`dlx, maps:get(num_discarded, O, 0) + maps:get(num_discard_checked_out, O, 0), `+
		`[element(3, C) || C <- maps:values(element(10, S))], [element(3, C) || {_, C} <- element(15, S)]} end)], `+
		`element(1, R) =/= ok orelse element(3, element(2, element(2, R))) + element(5, element(2, element(2, R))) + element(7, element(2, element(2, R))) > 0].`, prefix)
	var errs []error
	for _, n := range c.Nodes {
		if n.beamPID() == 0 {
			continue
		}
		out, err := n.CtlOutput(ctx, "eval", expr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return strings.Join(strings.Fields(out), " "), nil
	}
	return "", fmt.Errorf("no node of the cluster answered: %w", errors.Join(errs...))
}
