package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
