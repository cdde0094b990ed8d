package cmdrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExitCode(t *testing.T) {
	assert.Equal(t, ExitOK, ExitCode(nil))
	assert.Equal(t, ExitError, ExitCode(errors.New("boom")))
	assert.Equal(t, ExitUsage, ExitCode(Usagef("bad %s", "flag")))
	assert.Equal(t, ExitUsage, ExitCode(fmt.Errorf("wrapped: %w", Usage(errors.New("bad")))))
	assert.NoError(t, Usage(nil))
}

func TestExecute(t *testing.T) {
	newCmd := func(ran *bool) *cobra.Command {
		cmd := &cobra.Command{Use: "tool", Long: "tool does things.", RunE: func(cmd *cobra.Command, _ []string) error {
			*ran = true
			_, err := fmt.Fprint(cmd.OutOrStdout(), "out")
			return err
		}}
		cmd.Flags().String("name", "", "a name")
		return cmd
	}
	var ran bool
	var out, errOut bytes.Buffer
	require.NoError(t, Execute(context.Background(), newCmd(&ran), nil, &out, &errOut), "nil args are no args, not os.Args")
	assert.True(t, ran)
	assert.Equal(t, "out", out.String())

	ran = false
	out.Reset()
	require.NoError(t, Execute(context.Background(), newCmd(&ran), []string{"--help"}, &out, &errOut))
	assert.False(t, ran)
	assert.Contains(t, out.String(), "tool does things.")

	out.Reset()
	err := Execute(context.Background(), newCmd(&ran), []string{"--nme", "x"}, &out, &errOut)
	assert.Equal(t, ExitUsage, ExitCode(err))
	assert.EqualError(t, err, "unknown flag: --nme")
	assert.False(t, ran)
	assert.Empty(t, out.String()+errOut.String(), "errors are returned, not printed")
}
