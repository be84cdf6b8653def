/*
 * bcryptprimitives.dll for wine 8.0 (Debian 12), which has none: Rust's std
 * (1.78 and later) imports bcryptprimitives.dll!ProcessPrng to seed its
 * HashMaps, so without this no Rust program starts there. ProcessPrng fills
 * a buffer with random bytes and, as Windows documents it, always succeeds;
 * this one asks advapi32's SystemFunction036 (RtlGenRandom), which wine has.
 * Built and copied into the wine prefix's system32 by scripts/windows-env.sh;
 * never shipped, never used on real Windows.
 */
#include <windows.h>

__declspec(dllimport) BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance; (void)reason; (void)reserved;
    return TRUE;
}
