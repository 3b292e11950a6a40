"""asyncio coroutines awaiting each other (generator-style frames)."""
import asyncio


async def leaf(i):
    await asyncio.sleep(0)
    return i


async def middle(i):
    return await leaf(i) + await leaf(i + 1)


async def main():
    total = 0
    for _ in range(30):
        total += sum(await asyncio.gather(*(middle(i) for i in range(50))))
    return total


asyncio.run(main())
