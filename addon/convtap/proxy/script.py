"""The script an installed convtap gives mitmproxy: `mitmdump -s "$(convtap mitm-script)"`."""

from convtap.proxy.addon import ConvtapAddon

addons = [ConvtapAddon()]
