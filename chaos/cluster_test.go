package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConnectionsByNode(t *testing.T) {
	c := &RabbitCluster{Nodes: []*RabbitNode{
		{Name: "a@localhost", URL: "amqp://guest:guest@127.0.0.1:5701/"},
		{Name: "b@localhost", URL: "amqp://guest:guest@127.0.0.1:5702/"},
	}}
	by, err := c.byNode("a@localhost", "5701\n5701\n5702\n5799\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"a@localhost": 2, "b@localhost": 1, "port 5799": 1}, by)

	// What a node printed while another was cut off (from a failed run).
	_, err = c.byNode("a@localhost", "5701\n{badrpc,{'EXIT',{{channel_termination_timeout,{gen_server,call,[<0.6026.0>,{info,[port]},infinity]}}}}}\n")
	require.ErrorContains(t, err, "list_connections answered", "an RPC's error among the ports")
}
