"""asyncio coroutines awaiting each other (generator-style frames).
Argument: rounds (default 60)."""
import asyncio
import sys

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 60


async def leaf(i):
    await asyncio.sleep(0)
    return i


async def middle(i):
    return await leaf(i) + await leaf(i + 1)


async def main():
    total = 0
    for _ in range(ROUNDS):
        total += sum(await asyncio.gather(*(middle(i) for i in range(50))))
    return total


asyncio.run(main())
