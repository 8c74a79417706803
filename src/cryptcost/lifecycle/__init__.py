"""The lifecycle layer: every resource cryptcost creates is journalled
(:mod:`.journal`) and created and released through :class:`.resources.Resources`.

It sits below media, links and stacks, which ask it for mounts, loop
devices, daemons, namespaces and keys; nothing here imports them.
"""
