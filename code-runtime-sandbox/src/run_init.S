# The init of a run forked from a zygote (PID 1 of the run's pid namespace), executed by the
# run's first process once it has forked the program's process, PID 2 (see run_init.rs). It
# reaps every process that ends in the namespace until the program's process does, writes
# `exit <code>` to descriptor 3 (the run's report socket) and exits with that code: the code the
# program's process exited with, or 128 plus the signal that ended it.
#
# x86-64 Linux, no C library. run_init.rs holds the bytes `as` makes of this file's text
# (`as --64 -o run_init.o run_init.S && objcopy -O binary -j .text run_init.o code.bin`); its
# test checks that they are still these.
	.text
	.globl	_start
_start:
	# Named `cell`, as the zygote and its processes are.
	mov	$157, %eax		# prctl
	mov	$15, %edi		# PR_SET_NAME
	lea	name(%rip), %rsi
	syscall
	sub	$32, %rsp
	movl	$0, (%rsp)		# the status; 0 if no child is ever reaped
wait:
	mov	$61, %eax		# wait4(-1, &status, 0, NULL)
	mov	$-1, %rdi
	mov	%rsp, %rsi
	xor	%edx, %edx
	xor	%r10d, %r10d
	syscall
	cmp	$-4, %rax		# EINTR
	je	wait
	test	%rax, %rax
	js	ended			# no child left
	cmp	$2, %rax
	jne	wait
ended:
	mov	(%rsp), %eax
	mov	%eax, %ecx
	and	$0x7f, %ecx		# the signal that ended it, or 0
	jz	exited
	lea	128(%rcx), %eax
	jmp	code
exited:
	shr	$8, %eax
	and	$0xff, %eax
code:
	mov	%eax, %r8d
	lea	32(%rsp), %rsi		# digits, from the last
	mov	$10, %ecx
digit:
	xor	%edx, %edx
	div	%ecx
	add	$48, %dl
	dec	%rsi
	mov	%dl, (%rsi)
	test	%eax, %eax
	jnz	digit
	sub	$5, %rsi
	movl	$0x74697865, (%rsi)	# "exit"
	movb	$32, 4(%rsi)		# " "
	lea	32(%rsp), %rdx
	sub	%rsi, %rdx
	mov	$1, %eax		# write(3, message, length)
	mov	$3, %edi
	syscall
	mov	$231, %eax		# exit_group(code)
	mov	%r8d, %edi
	syscall
name:
	.asciz	"cell"
	.section .note.GNU-stack,"",@progbits
